-- purge_dead.lua: delete the oldest dead letters and their envelopes.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] how many at most
-- Returns how many were deleted.
local ids = redis.call('ZRANGE', KEYS[4], 0, tonumber(ARGV[3]) - 1)
for _, id in ipairs(ids) do
  redis.call('HDEL', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
end
return #ids
