-- room/touch.lua: a waiting token is still there (its waiting_ttl starts again).
-- KEYS: as in room/prelude.lua   ARGV[1] the token   ARGV[2] waiting_ttl_ms
-- Returns 1 touched, 0 not waiting (or already expired).
local now = now_ms()
local s = state_of(ARGV[1], now, tonumber(ARGV[2]))
if not s or s.state ~= 'waiting' then
  return 0
end
redis.call('ZADD', KEYS[2], 'XX', now, record(s.arrival, ARGV[1]))
return 1
