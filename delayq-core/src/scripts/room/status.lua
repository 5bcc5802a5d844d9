-- room/status.lua: where a token stands.
-- KEYS: as in room/prelude.lua   ARGV[1] the token   ARGV[2] waiting_ttl_ms
-- Returns { 'waiting', position (1-based), ahead, eta_ms or -1 when there is no rate yet },
-- { 'active', ms left }, or { 'unknown' } (never entered, left, completed or expired).
local now = now_ms()
local s = state_of(ARGV[1], now, tonumber(ARGV[2]))
if s and s.state == 'waiting' then
  -- Its place is how many wait up to it, from the last admitted.
  local position = redis.call('ZCOUNT', KEYS[1], '(' .. s.upto, s.arrival)
  local rate = tonumber(redis.call('GET', KEYS[7]) or '')
  local eta = -1
  if rate and rate > 0 then
    eta = math.floor(position / rate * 1000)
  end
  return { 'waiting', position, position - 1, eta }
elseif s then
  return { 'active', s.expiry - now }
end
return { 'unknown' }
