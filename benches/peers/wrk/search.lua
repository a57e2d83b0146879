-- Top-10 BM25 searches, every term required, of the queries in PEERS_QUERIES (one per line:
-- 1-2 plain words), returning the ids.
local table_name = os.getenv("PEERS_TABLE") or "ft1"
local queries = {}
for line in io.lines(os.getenv("PEERS_QUERIES")) do
  queries[#queries + 1] = line
end
-- each wrk thread draws its own sequence
local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("id", threads)
end
init = function()
  math.randomseed(os.time() + 7919 * (id or 0))
end
request = function()
  local body = '{"query":"' .. queries[math.random(#queries)] .. '","mode":"all","limit":10,"fields":["_id"]}'
  return wrk.format("POST", "/v1/tables/" .. table_name .. "/search", { ["Content-Type"] = "application/json" }, body)
end
