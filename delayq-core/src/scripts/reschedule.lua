-- reschedule.lua: move a delayed message (hot or far) to a new due time, which may put it in
-- another far bucket or bring it into the hot keys.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] id   ARGV[4] when_kind ('delay' ms or 'at' unix ms)   ARGV[5] when
-- Returns 1 when moved, 0 when the message is not delayed (unknown, in flight, dead or done).
local id = ARGV[3]
local t = id_time(id)
local old_next = next_due()
local m
if redis.call('ZSCORE', KEYS[1], id) then
  m = decode(redis.call('HGET', KEYS[3], id))
  if not m then return redis.error_reply('delayq: envelope of ' .. id .. ' in ' .. KEYS[3] .. ' does not parse') end
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[3], id)
else
  local b = far_bucket(id, t)
  if not b then return 0 end
  m = far_decode(redis.call('HGET', far_key(b), id), b)
  if not m then return redis.error_reply('delayq: record of ' .. id .. ' in ' .. far_key(b) .. ' does not parse') end
  far_remove(id, b)
end
local now = now_ms()
local due = tonumber(ARGV[5])
if ARGV[4] == 'delay' then due = now + due end
m.due_ms = due
local look = place(id, m, now, t)
far_flush()
if old_next == -1 or look < old_next or old_next <= now then wake(WAKE_BOSS) end
return 1
