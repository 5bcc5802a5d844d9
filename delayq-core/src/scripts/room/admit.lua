-- room/admit.lua: one tick. Expires admissions past their time and waiting tokens untouched
-- for waiting_ttl (at most `sweep` of them a tick), then moves the earliest arrivals from
-- `waiting` to `active` with their expiry: admit_per_tick of them, or, with a capacity, no
-- more than leaves the active ones under it. All in one step, so no token is ever in both
-- sets or in neither.
-- KEYS: as in room/prelude.lua
-- ARGV[1] admit_per_tick   ARGV[2] capacity (0: none)   ARGV[3] active_ttl_ms
-- ARGV[4] waiting_ttl_ms   ARGV[5] sweep   ARGV[6] the ticking lease's value, or '' (unfenced)
-- Returns { admitted, expired waiting, expired active }, or false when ARGV[6] is given and
-- no longer holds the lease (a stale ticker).
if ARGV[6] ~= '' and redis.call('GET', KEYS[6]) ~= ARGV[6] then
  return false
end
local now = now_ms()
local expired_active = redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[4]),
  'LIMIT', 0, tonumber(ARGV[5]))
if #stale > 0 then
  redis.call('ZREM', KEYS[1], unpack(stale))
  redis.call('ZREM', KEYS[2], unpack(stale))
end
local n = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
if capacity > 0 then
  n = math.min(n, math.max(capacity - redis.call('ZCARD', KEYS[3]), 0))
end
local admitted = 0
if n > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[1], n)
  local expiry = now + tonumber(ARGV[3])
  local batch, tokens = {}, {}
  for i = 1, #popped, 2 do
    batch[#batch + 1] = expiry
    batch[#batch + 1] = popped[i]
    tokens[#tokens + 1] = popped[i]
    -- unpack() has a limit on how many values it spreads; flush in chunks.
    if #tokens == 1000 then
      redis.call('ZADD', KEYS[3], unpack(batch))
      redis.call('ZREM', KEYS[2], unpack(tokens))
      admitted = admitted + #tokens
      batch, tokens = {}, {}
    end
  end
  if #tokens > 0 then
    redis.call('ZADD', KEYS[3], unpack(batch))
    redis.call('ZREM', KEYS[2], unpack(tokens))
    admitted = admitted + #tokens
  end
end
redis.call('ZADD', KEYS[5], now, now .. ':' .. admitted)
redis.call('PEXPIRE', KEYS[5], 120000)
return { admitted, #stale, expired_active }
