-- cancel.lua: remove a message that has not started.
-- KEYS[1] delayed   KEYS[2] inflight   KEYS[3] msg   KEYS[4] dead
-- ARGV[1] id
-- Returns 'removed' (it was delayed or dead), 'inflight' (claimed right now; left alone) or
-- 'notfound' (unknown, or already done).
local id = ARGV[1]
if redis.call('ZSCORE', KEYS[2], id) then return 'inflight' end
if redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[4], id) > 0 then
  redis.call('HDEL', KEYS[3], id)
  return 'removed'
end
return 'notfound'
