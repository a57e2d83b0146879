-- Top-10 BM25 searches of the queries in PEERS_QUERIES (one per line), returning the ids.
-- PEERS_KIND says what a line is (models.py, Search.KINDS): unset, `term` or `and`: plain words,
-- every term required; `or`: any of them; `phrase`: the words in a row; `prefix`: every term
-- starting with the line.
dofile("threads.lua")
local table_name = os.getenv("PEERS_TABLE") or "ft1"
local queries = lines(os.getenv("PEERS_QUERIES"))
local kind = os.getenv("PEERS_KIND") or "and"
local mode = kind == "or" and "any" or "all"
local before, after = "", ""
if kind == "phrase" then
  before, after = '\\"', '\\"'
elseif kind == "prefix" then
  after = "*"
end
request = function()
  local q = before .. queries[math.random(#queries)] .. after
  local body = '{"query":"' .. q .. '","mode":"' .. mode .. '","limit":10,"fields":["_id"]}'
  return wrk.format("POST", "/v1/tables/" .. table_name .. "/search", { ["Content-Type"] = "application/json" }, body)
end
