-- Shared by the scripts that draw random requests: each wrk thread gets its own number and seeds
-- its own sequence from it, and `lines` reads a file of one request argument per line. wrk runs
-- with this folder as its working directory (common.py), so a script loads it with
-- `dofile("threads.lua")`.
local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("id", threads)
end
init = function()
  math.randomseed(os.time() + 7919 * (id or 0))
end

function lines(path)
  local out = {}
  for line in io.lines(path) do
    out[#out + 1] = line
  end
  return out
end
