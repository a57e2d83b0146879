-- Point GETs of random ids among the imported documents (d0 … d{N-1}); N from the environment.
local n = tonumber(os.getenv("PEERS_DOCS") or "100000")
local table_name = os.getenv("PEERS_TABLE") or "docs"
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/v1/tables/" .. table_name .. "/documents/d" .. math.random(0, n - 1))
end
