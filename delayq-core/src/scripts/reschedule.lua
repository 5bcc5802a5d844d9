-- reschedule.lua: move a delayed message to a new due time.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] id   ARGV[4] when_kind ('delay' ms or 'at' unix ms)   ARGV[5] when
-- Returns 1 when moved, 0 when the message is not delayed (unknown, in flight, dead or done).
local id = ARGV[3]
if not redis.call('ZSCORE', KEYS[1], id) then return 0 end
local m = decode(redis.call('HGET', KEYS[3], id))
if not m then return redis.error_reply('delayq: envelope of ' .. id .. ' in ' .. KEYS[3] .. ' does not parse') end
local now = now_ms()
local due = tonumber(ARGV[5])
if ARGV[4] == 'delay' then due = now + due end
local old_head = head_score(KEYS[1])
m.due_ms = due
redis.call('HSET', KEYS[3], id, encode(m))
redis.call('ZADD', KEYS[1], due, id)
if due < old_head then wake(WAKE_BOSS) end
return 1
