-- bury.lua: a claimed message whose envelope the client could not read goes to the dead
-- letters untouched (its reason is the client's log line: the envelope cannot be rewritten).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] id   ARGV[4] delivery token   ARGV[5] dead_max   ARGV[6] dead_ttl ms (dead letters
-- past these bounds are dropped, see trim_dead)
-- Returns the dead letters dropped past the bounds plus one when it was buried, 0 when that
-- delivery no longer owned it.
local id = ARGV[3]
if not owned_raw(id, ARGV[4]) then return 0 end
local now = now_ms()
redis.call('ZREM', KEYS[2], id)
claim_ended(id)
redis.call('ZADD', KEYS[4], now, id)
count('dead', 1, now)
step_ended(id, now, false)
announce_ends({ id }, 1, 1, 'dead', 'its envelope cannot be read')
return 1 + trim_dead(now, ARGV[5], ARGV[6])
