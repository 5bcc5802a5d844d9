-- room/admit.lua: one tick. Ends the admissions of ticks past their expiry (their tokens leave
-- the line in one range deletion), expires waiting tokens untouched for waiting_ttl (looking
-- at no more than `sweep` touch records a tick), then admits the earliest arrivals by moving
-- `admitted` up the line: admit_per_tick of them, or, with a capacity, no more than leaves the
-- active ones under it. One step, so no token is ever in both states or in neither. An
-- expired token is never admitted: when the sweep could not reach every stale record, the
-- tokens about to be admitted are looked at one by one (admit_live).
-- KEYS: as in room/prelude.lua
-- ARGV[1] admit_per_tick   ARGV[2] capacity (0: none)   ARGV[3] active_ttl_ms
-- ARGV[4] waiting_ttl_ms   ARGV[5] sweep: touch records looked at, at most (at least twice
-- admit_per_tick, so that the records of admitted tokens go as fast as they come)
-- ARGV[6] the ticking lease's value, or '' (unfenced)
-- ARGV[7] expire: waiting tokens expired a tick, at most (about; whole thousands of records
-- are looked at)
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
local upto = admitted_upto()

-- Ticks past their expiry, oldest first: their tokens still on leave the line.
local expired_active = 0
-- (A hundred at most a tick; more wait for the next.)
for _, t in ipairs(redis.call('ZRANGE', KEYS[3], 0, 99)) do
  local last, expiry = string.match(t, '^(%d+):(%d+)$')
  if tonumber(expiry) > now then break end
  expired_active = expired_active + tonumber(redis.call('HGET', KEYS[9], last) or 0)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', last)
  redis.call('ZREM', KEYS[3], t)
  redis.call('HDEL', KEYS[9], last)
end

-- The oldest touch records past waiting_ttl, a thousand at a time: of their tokens, those
-- still waiting (arrival above the mark; the record says) expire, at most `expire` a tick;
-- the others were admitted since and only lose the record. Records are dropped only as far
-- as they were looked at.
local stale = redis.call('ZRANGE', KEYS[2], '-inf', now - tonumber(ARGV[4]), 'BYSCORE',
  'LIMIT', 0, tonumber(ARGV[5]))
local expired_waiting, looked = 0, 0
local expire = tonumber(ARGV[7])
for from = 1, #stale, 1000 do
  if expired_waiting >= expire then break end
  local gone = {}
  for i = from, math.min(from + 999, #stale) do
    local arrival, token = string.match(stale[i], '^(%d+):(.+)$')
    if arrival and tonumber(arrival) > upto then gone[#gone + 1] = token end
    looked = i
  end
  -- unpack() spreads a limited number of values: a thousand at a time.
  if #gone > 0 then
    expired_waiting = expired_waiting + redis.call('ZREM', KEYS[1], unpack(gone))
  end
end
if looked > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, looked - 1)
end

local n = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
if capacity > 0 then
  local active = 0
  for _, count in ipairs(redis.call('HVALS', KEYS[9])) do active = active + tonumber(count) end
  n = math.min(n, math.max(capacity - active, 0))
end
-- The new end of the admitted when some waiting tokens may have expired unswept: each of the
-- earliest waiting tokens is looked at in turn; an expired one leaves the line (counted as
-- expired), a live one is admitted, until n are, or n + expire tokens were looked at (a flood
-- of expired tokens slows admission for a tick or two; it never admits one of them).
local function admit_live(first_rank, n, waiting_ttl)
  local new_upto, live, looked, rank = upto, 0, 0, first_rank
  local limit = n + expire
  while live < n and looked < limit do
    local batch = redis.call('ZRANGE', KEYS[1], rank, rank + math.min(limit - looked, 1000) - 1,
      'WITHSCORES')
    if #batch == 0 then break end
    local gone, gone_records = {}, {}
    for i = 1, #batch, 2 do
      local token, arrival = batch[i], tonumber(batch[i + 1])
      local r = record(arrival, token)
      local touched = tonumber(redis.call('ZSCORE', KEYS[2], r) or 0)
      looked = looked + 1
      if touched + waiting_ttl <= now then
        gone[#gone + 1], gone_records[#gone_records + 1] = token, r
      else
        live, new_upto = live + 1, arrival
        if live == n then break end
      end
    end
    if #gone > 0 then
      redis.call('ZREM', KEYS[1], unpack(gone))
      redis.call('ZREM', KEYS[2], unpack(gone_records))
      expired_waiting = expired_waiting + #gone
    end
    rank = first_rank + live
  end
  return new_upto
end

local admitted = 0
if n > 0 then
  local first_rank = redis.call('ZCOUNT', KEYS[1], '-inf', upto)
  local waiting_ttl = tonumber(ARGV[4])
  local new_upto
  if #redis.call('ZRANGE', KEYS[2], '-inf', now - waiting_ttl, 'BYSCORE', 'LIMIT', 0, 1) > 0 then
    -- The sweep stopped short: a waiting token may be past waiting_ttl. Admit only live ones.
    new_upto = admit_live(first_rank, n, waiting_ttl)
  else
    -- Every touch record is fresh, so every waiting token is: the n-th waiting token, or the
    -- last one when fewer wait, is the new end of the admitted (O(log n)).
    local last = redis.call('ZRANGE', KEYS[1], first_rank + n - 1, first_rank + n - 1, 'WITHSCORES')
    if not last[2] then last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES') end
    new_upto = tonumber(last[2] or upto)
  end
  if new_upto > upto then
    admitted = redis.call('ZCOUNT', KEYS[1], '(' .. upto, new_upto)
    redis.call('SET', KEYS[8], new_upto)
    redis.call('ZADD', KEYS[3], new_upto, new_upto .. ':' .. (now + tonumber(ARGV[3])))
    redis.call('HSET', KEYS[9], new_upto, admitted)
  end
end
redis.call('ZADD', KEYS[5], now, now .. ':' .. admitted)
redis.call('PEXPIRE', KEYS[5], 120000)
-- The admission rate over the last minute, for status to read in one GET.
local rate = admit_rate(now)
redis.call('SET', KEYS[7], string.format('%.6f', rate), 'PX', 120000)
return { admitted, expired_waiting, expired_active }
