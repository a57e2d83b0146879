-- Durable PUTs of new ids into the table PEERS_PUTS (puts): each wrk thread has its own prefix and
-- counter, and each run its own PEERS_RUN, so no id is written twice.
local body = '{"name":"user","age":42,"city":"Oslo","tags":["a","c"],"pad":"' .. string.rep("x", 100) .. '"}'
local run = os.getenv("PEERS_RUN") or "0"
local table_name = os.getenv("PEERS_PUTS") or "puts"
local threads = 0
local counter = 0
setup = function(thread)
  threads = threads + 1
  thread:set("prefix", "r" .. run .. "t" .. threads .. "-")
end
request = function()
  counter = counter + 1
  return wrk.format("PUT", "/v1/tables/" .. table_name .. "/documents/" .. prefix .. counter,
    { ["Content-Type"] = "application/json" }, body)
end
