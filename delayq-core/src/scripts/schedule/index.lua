-- index.lua: changes a namespace's schedule index, bumps its version and logs which schedule
-- changed at that version, at once (so that a runtime reading the log from the version it saw
-- last never misses a change; the three keys share the `{schedules}` slot).
-- KEYS[1] the index (HASH name -> topic), KEYS[2] its version (a counter), KEYS[3] the change
--   log (ZSET name -> the version of its last change)
-- ARGV[1] the schedule's name, ARGV[2] its topic ('' removes it from the index),
-- ARGV[3] how many versions the log keeps (older entries go)
-- Returns the new version.
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
local v = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[3], v, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. (v - tonumber(ARGV[3])))
return v
