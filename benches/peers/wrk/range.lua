-- One streamed query per request: the ids of every document with `age` in a random 3-value range
-- (about 3% of the table), as NDJSON.
local table_name = os.getenv("PEERS_TABLE") or "docs"
math.randomseed(os.time())
request = function()
  local a = math.random(0, 97)
  local body = '{"filter":{"age":{"$gte":' .. a .. ',"$lte":' .. (a + 2) .. '}},"fields":["_id"]}'
  return wrk.format("POST", "/v1/tables/" .. table_name .. "/query",
    { ["Content-Type"] = "application/json", ["Accept"] = "application/x-ndjson" }, body)
end
