-- purge_dead.lua: delete dead letters and their envelopes: the oldest ones, or one by id.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] 'oldest': ARGV[4] how many at most
--         'id':     ARGV[4] the id (deleted only when it is dead)
-- Returns how many were deleted.
local ids
if ARGV[3] == 'id' then
  ids = redis.call('ZSCORE', KEYS[4], ARGV[4]) and { ARGV[4] } or {}
else
  ids = redis.call('ZRANGE', KEYS[4], 0, tonumber(ARGV[4]) - 1)
end
for _, id in ipairs(ids) do
  redis.call('HDEL', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
end
return #ids
