-- purge_dead.lua: delete the oldest dead letters and their envelopes.
-- KEYS[1] dead   KEYS[2] msg
-- ARGV[1] how many at most
-- Returns how many were deleted.
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
for _, id in ipairs(ids) do
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[1], id)
end
return #ids
