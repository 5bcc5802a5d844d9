-- create.lua: writes a new flow, every step or none (the client checked the graph).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] ttl (ms the flow is kept once it ended)   ARGV[4] start grace (ms: a flow whose
--   start did not finish, its first steps never sent, is removed after it)
-- ARGV[5] n, then n groups of name, record (JSON), dependencies count, payload
-- Returns 'created', or 'exists' (a flow of this id is there; nothing was written).
if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
local now = now_ms()
local n = tonumber(ARGV[5])
local recs, payloads, waits, ready = {}, {}, {}, {}
for i = 0, n - 1 do
  local at = 6 + 4 * i
  local name, rec, deps, payload = ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2]), ARGV[at + 3]
  local r, p = #recs, #payloads
  recs[r + 1], recs[r + 2] = name, rec
  payloads[p + 1], payloads[p + 2] = name, payload
  if deps > 0 then
    local w = #waits
    waits[w + 1], waits[w + 2] = name, deps
    put_state(name, { state = 'waiting', gen = 0 })
  else
    put_state(name, { state = 'ready', gen = 0 })
    ready[#ready + 1] = name
  end
end
hset_all(KEYS[2], recs)
hset_all(KEYS[5], payloads)
hset_all(KEYS[4], waits)
flush()
for i = 1, #ready, 1000 do
  redis.call('SADD', KEYS[6], unpack(ready, i, math.min(i + 999, #ready)))
end
redis.call('HSET', KEYS[1], 'state', 'running', 'created', now, 'steps', n, 'left', n,
  'ttl', ARGV[3], 'starting', 1)
keep_for(tonumber(ARGV[4]))
return 'created'
