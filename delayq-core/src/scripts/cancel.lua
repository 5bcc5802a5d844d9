-- cancel.lua: remove a message that has not started.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] id
-- Returns 'removed' (it was delayed, hot or far), 'inflight' (claimed right now; left alone)
-- or 'notfound' (unknown, already done, or dead: dead letters go through purge_dead).
local id = ARGV[3]
if redis.call('ZSCORE', KEYS[2], id) then return 'inflight' end
if redis.call('ZREM', KEYS[1], id) == 1 then
  redis.call('HDEL', KEYS[3], id)
  return 'removed'
end
local b = far_bucket(id, id_time(id))
if b then
  far_remove(id, b)
  far_flush()
  return 'removed'
end
return 'notfound'
