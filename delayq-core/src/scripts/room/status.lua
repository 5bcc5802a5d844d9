-- room/status.lua: where a token stands.
-- KEYS: as in room/prelude.lua   ARGV[1] the token   ARGV[2] waiting_ttl_ms
-- Returns { 'waiting', position (1-based), ahead, eta_ms or -1 when there is no rate yet },
-- { 'active', ms left }, or { 'unknown' } (never entered, left, completed or expired).
local now = now_ms()
local rank = redis.call('ZRANK', KEYS[1], ARGV[1])
if rank then
  local touched = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or 0)
  if touched + tonumber(ARGV[2]) < now then
    return { 'unknown' }
  end
  local rate = tonumber(redis.call('GET', KEYS[7]) or '')
  local eta = -1
  if rate and rate > 0 then
    eta = math.floor((rank + 1) / rate * 1000)
  end
  return { 'waiting', rank + 1, rank, eta }
end
local expires = redis.call('ZSCORE', KEYS[3], ARGV[1])
if expires and tonumber(expires) > now then
  return { 'active', tonumber(expires) - now }
end
return { 'unknown' }
