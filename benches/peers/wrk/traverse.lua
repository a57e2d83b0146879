-- Every vertex within PEERS_DEPTH edges of a random start among PEERS_NODES vertices (n0 …), along
-- PEERS_DIRECTION (out, or any: both ways), each once, the start included: their ids.
dofile("threads.lua")
local n = tonumber(os.getenv("PEERS_NODES") or "100000")
local vertices = os.getenv("PEERS_VERTICES") or "nodes1"
local edges = os.getenv("PEERS_EDGES") or "links1"
local depth = os.getenv("PEERS_DEPTH") or "3"
local direction = os.getenv("PEERS_DIRECTION") or "out"
request = function()
  local body = '{"start":"' .. vertices .. '/n' .. math.random(0, n - 1) .. '","edges":["' .. edges ..
    '"],"direction":"' .. direction .. '","min_depth":0,"max_depth":' .. depth .. ',"limit":10000}'
  return wrk.format("POST", "/v1/graph/traverse", { ["Content-Type"] = "application/json" }, body)
end
