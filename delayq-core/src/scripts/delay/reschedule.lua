-- reschedule.lua: move a delayed message (hot or far) to a new due time, which may put it in
-- another far bucket or bring it into the hot keys.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far buckets of the id's old and
-- new due time)
-- ARGV[3] id   ARGV[4] when_kind ('delay' ms or 'at' unix ms)   ARGV[5] when
-- Returns 1 when moved, 0 when the message is not delayed (unknown, in flight, dead or done).
local id = ARGV[3]
local t = id_time(id)
local now = now_ms()
local due = tonumber(ARGV[5])
if ARGV[4] == 'delay' then due = now + due end
local hot = redis.call('ZSCORE', KEYS[1], id)
-- Due and waiting in `ready` (priorities): moved like a hot one, then taken out of `ready`.
local ready = not hot and redis.call('ZSCORE', KEYS[12], id)
hot = hot or ready
if goes_far(due, now) then need(bucket_of(due)) end
if not hot then need_lookup(id, t, false) end
local missing = missing_buckets()
if missing then return missing end
-- Before the first write (see far.lua).
local foreign = foreign_bucket()
if foreign then return foreign end

local old_next = next_due()
local m, was
if hot then
  m = decode(redis.call('HGET', KEYS[3], id))
  if not m then return redis.error_reply('delayq: envelope of ' .. id .. ' in ' .. KEYS[3] .. ' does not parse') end
else
  was = far_bucket(id, t)
  if not was then return 0 end
  m = far_decode(redis.call('HGET', far_key(was), id), was)
  if not m then return redis.error_reply('delayq: record of ' .. id .. ' in ' .. far_key(was) .. ' does not parse') end
end
m.due_ms = due
-- The new home first, then the old one cleared (see far.lua).
local look, now_in = place(id, m, now, t)
far_flush()
if hot then
  if ready then redis.call('ZREM', KEYS[12], id) end
  if now_in then
    if not ready then redis.call('ZREM', KEYS[1], id) end
    redis.call('HDEL', KEYS[3], id)
    redis.call('HDEL', KEYS[14], id)
  end
else
  far_remove(id, was, t, now_in)
  far_flush()
end
if old_next == -1 or look < old_next or old_next <= now then wake(WAKE_BOSS) end
return 1
