-- Top-10 nearest neighbours (the vector index's default ef) of the query vectors in PEERS_QUERIES
-- (one JSON array per line), returning the ids.
local table_name = os.getenv("PEERS_TABLE") or "vec1"
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
  local body = '{"field":"emb","k":10,"fields":["_id"],"vector":' .. queries[math.random(#queries)] .. '}'
  return wrk.format("POST", "/v1/tables/" .. table_name .. "/vector-search",
    { ["Content-Type"] = "application/json" }, body)
end
