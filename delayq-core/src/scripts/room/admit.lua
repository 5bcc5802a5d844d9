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
-- Admissions per second over the last minute of ticks (0 before there is one).
local function admit_rate(now)
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - 60000)
  local ticks = redis.call('ZRANGE', KEYS[5], 0, -1, 'WITHSCORES')
  if #ticks == 0 then
    return 0
  end
  local admitted, first = 0, tonumber(ticks[2])
  for i = 1, #ticks, 2 do
    admitted = admitted + tonumber(string.match(ticks[i], ':(%d+)$'))
  end
  -- The window runs from the first tick seen to now, at least one second.
  local span = math.max(now - first, 1000) / 1000
  return admitted / span
end

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
  -- The head of the line, then one range deletion (cheaper than ZPOPMIN's one by one).
  local head = redis.call('ZRANGE', KEYS[1], 0, n - 1)
  if #head > 0 then
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #head - 1)
  end
  local expiry = now + tonumber(ARGV[3])
  local batch, tokens = {}, {}
  for _, token in ipairs(head) do
    batch[#batch + 1] = expiry
    batch[#batch + 1] = token
    tokens[#tokens + 1] = token
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
-- The admission rate over the last minute, for status to read in one GET.
local rate = admit_rate(now)
redis.call('SET', KEYS[7], string.format('%.6f', rate), 'PX', 120000)
return { admitted, #stale, expired_active }
