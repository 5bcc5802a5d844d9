-- room/leave.lua: a token leaves (from the line, or gives up its admission), or completes
-- (its admission ends and frees its slot at once). An admission that has already expired is
-- left for the next tick to sweep (and count).
-- KEYS: as in room/prelude.lua   ARGV[1] the token   ARGV[2] 'leave' or 'complete'
-- ARGV[3] waiting_ttl_ms
-- Returns 1 when it was waiting ('leave' only) or active, else 0.
local s = state_of(ARGV[1], now_ms(), tonumber(ARGV[3]))
if not s or (s.state == 'waiting' and ARGV[2] ~= 'leave') then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], record(s.arrival, ARGV[1]))
if s.state == 'active' then
  -- One fewer inside for its tick.
  redis.call('HINCRBY', KEYS[9], s.last, -1)
end
return 1
