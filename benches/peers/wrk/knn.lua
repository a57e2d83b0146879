-- Top-10 nearest neighbours (the vector index's default ef) of the query vectors in PEERS_QUERIES
-- (one JSON array per line), returning the ids.
dofile("threads.lua")
local table_name = os.getenv("PEERS_TABLE") or "vec1"
local queries = lines(os.getenv("PEERS_QUERIES"))
request = function()
  local body = '{"field":"emb","k":10,"fields":["_id"],"vector":' .. queries[math.random(#queries)] .. '}'
  return wrk.format("POST", "/v1/tables/" .. table_name .. "/vector-search",
    { ["Content-Type"] = "application/json" }, body)
end
