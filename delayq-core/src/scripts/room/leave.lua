-- room/leave.lua: a token leaves (from the line, or gives up its admission), or completes
-- (its admission ends and frees its slot at once). An admission that has already expired is
-- left for the next tick to sweep (and count).
-- KEYS: as in room/prelude.lua   ARGV[1] the token   ARGV[2] 'leave' or 'complete'
-- Returns 1 when it was waiting ('leave' only) or active, else 0.
if ARGV[2] == 'leave' and redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 1
end
local expires = redis.call('ZSCORE', KEYS[3], ARGV[1])
if expires and tonumber(expires) > now_ms() then
  return redis.call('ZREM', KEYS[3], ARGV[1])
end
return 0
