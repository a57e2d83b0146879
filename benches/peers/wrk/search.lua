-- Top-10 BM25 searches, every term required, of the queries in PEERS_QUERIES (one per line:
-- 1-2 plain words), returning the ids.
dofile("threads.lua")
local table_name = os.getenv("PEERS_TABLE") or "ft1"
local queries = lines(os.getenv("PEERS_QUERIES"))
request = function()
  local body = '{"query":"' .. queries[math.random(#queries)] .. '","mode":"all","limit":10,"fields":["_id"]}'
  return wrk.format("POST", "/v1/tables/" .. table_name .. "/search", { ["Content-Type"] = "application/json" }, body)
end
