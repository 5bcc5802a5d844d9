-- create.lua: writes a new flow, every step or none (the client checked the graph).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] ttl (ms the flow is kept once it ended)   ARGV[4] start grace (ms: a flow whose
--   start did not finish, its first steps never sent, is removed after it)
-- ARGV[5] n, then n groups of name, record (JSON), dependencies count, payload
-- Returns 'created', or 'exists' (a flow of this id is there; nothing was written).
if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
local now = now_ms()
local n = tonumber(ARGV[5])
local recs, payloads, states, waits = {}, {}, {}, {}
-- A new step's state (as `put_state` writes it), the same text for all. A step that waits for
-- nothing is written sent, and never enters the outbox: the start sends it next, from its own
-- memory, and then runs started.lua. Until then `unsent` in meta says that some may not be in
-- their topics: a start that died leaves it, and the sweep of its intent sends every step
-- written sent again (unsent.lua; each under its step id, a duplicate where it was sent).
local WAITING, SENT = 'waiting 0 0 0\n', string.format('sent 0 %d 0\n', now)
local ARGV = ARGV -- a local: read for every step
for i = 0, n - 1 do
  local at = 6 + 4 * i
  local name, deps = ARGV[at], tonumber(ARGV[at + 2])
  local k = 2 * i
  recs[k + 1], recs[k + 2] = name, ARGV[at + 1]
  payloads[k + 1], payloads[k + 2] = name, ARGV[at + 3]
  states[k + 1] = name
  if deps > 0 then
    local w = #waits
    waits[w + 1], waits[w + 2] = name, deps
    states[k + 2] = WAITING
  else
    states[k + 2] = SENT
  end
end
hset_all(KEYS[2], recs)
hset_all(KEYS[5], payloads)
hset_all(KEYS[3], states)
hset_all(KEYS[4], waits)
redis.call('HSET', KEYS[1], 'state', 'running', 'created', now, 'steps', n, 'left', n,
  'ttl', ARGV[3], 'starting', 1, 'unsent', 1)
keep_for(tonumber(ARGV[4]))
return 'created'
