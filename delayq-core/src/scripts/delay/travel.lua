-- travel.lua (the test kit's only, feature `testing`): time travel. `d` passes for everything
-- that waits in the topic: every due time moves `d` earlier, so what was due within `d` is
-- due now, in due order, and the rest is `d` nearer. Each envelope keeps its own due time, so
-- a handler still sees the original one. Claims in flight keep their ack deadlines, unless
-- ARGV[4] is '1': then `d` passes for them too (a claim whose deadline falls within `d` is
-- redelivered by the back pool, which is woken).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: every far bucket of the topic)
-- ARGV[3] d (ms), ARGV[4] '1' to move the claims' ack deadlines too, else '0'
-- then pairs from ARGV[5]: id, ms: a tick the kit wrote just now whose due time it moves a
--   further `ms` earlier (ticks are written at their nominal time; earlier advances passed
--   that much time already)
-- Far messages are all moved into the hot keys first (at most PROMOTE_MAX a call: the reply
-- then asks to be called again, and nothing has moved yet).
-- Returns { messages due now, 1 when far buckets are left (call again) else 0 }.
local ZADD_CHUNK = 1000
local now = now_ms()
promote(math.huge) -- every bucket, however far (due times go up to the year 9999)
far_flush()
if redis.call('EXISTS', KEYS[7]) == 1 then return { 0, 1 } end
local d = tonumber(ARGV[3])
for i = 5, #ARGV, 2 do
  local s = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]))
  if s then redis.call('ZADD', KEYS[1], s - tonumber(ARGV[i + 1]), ARGV[i]) end
end

-- Every score of `key` moves `d` earlier (in chunks: `unpack` of a whole large topic
-- overflows Lua's stack); returns how many are now at or before now.
local function shift(key)
  local all = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local scores, reached = {}, 0
  for i = 1, #all, 2 do
    local s = tonumber(all[i + 1]) - d
    if s <= now then reached = reached + 1 end
    scores[#scores + 1] = s
    scores[#scores + 1] = all[i]
  end
  for from = 1, #scores, 2 * ZADD_CHUNK do
    redis.call('ZADD', key, unpack(scores, from, math.min(from + 2 * ZADD_CHUNK - 1, #scores)))
  end
  return reached
end

local due = shift(KEYS[1])
-- Due messages waiting in `ready` (priorities) go back to `delayed`, `d` earlier like the
-- rest, their priorities indexed again: the next claim orders them with what this travel made
-- due (they count as made due).
local ready = redis.call('ZRANGE', KEYS[12], 0, -1, 'WITHSCORES')
if #ready > 0 then
  local scores = {}
  for i = 1, #ready, 2 do
    scores[#scores + 1] = ready_due(ready[i + 1]) - d
    scores[#scores + 1] = ready[i]
    local p = ready_priority(ready[i + 1])
    if p ~= DEFAULT_PRIORITY then redis.call('HSET', KEYS[14], ready[i], p) end
  end
  for from = 1, #scores, 2 * ZADD_CHUNK do
    redis.call('ZADD', KEYS[1], unpack(scores, from, math.min(from + 2 * ZADD_CHUNK - 1, #scores)))
  end
  redis.call('DEL', KEYS[12])
  due = due + #ready / 2
end
-- For a rate-limited topic, `d` passes for the limit too: the claims it would have let start
-- over `d` may start now, for the messages this travel made due (claim_due spends this credit
-- before the limit's own time, and drops what is left once nothing is due).
-- The limit's own time moves `d` earlier too, as every due time does.
local tat = tonumber(redis.call('HGET', KEYS[9], 'rate_tat'))
if tat then
  redis.call('HSET', KEYS[9], 'rate_tat', string.format('%d', tat - d * 1000))
  if due > 0 then redis.call('HINCRBY', KEYS[9], 'rate_credit', d * 1000) end
end
-- Reservations (`dedup_for`) end `d` earlier too.
shift(KEYS[11])
unreserve_expired(now)
-- `rate_per_key`: the keys' times move `d` earlier (those now passed go), and the messages
-- this travel made due start without waiting for their keys' limits (`key_credit`, spent
-- once nothing is due, see claim_due.lua): `d` passed for the keys too.
local keyrate = redis.call('ZRANGE', KEYS[13], 0, -1, 'WITHSCORES')
if #keyrate > 0 then
  local times = {}
  for i = 1, #keyrate, 2 do
    times[#times + 1] = string.format('%d', tonumber(keyrate[i + 1]) - d * 1000)
    times[#times + 1] = keyrate[i]
  end
  for from = 1, #times, 2 * ZADD_CHUNK do
    redis.call('ZADD', KEYS[13], unpack(times, from, math.min(from + 2 * ZADD_CHUNK - 1, #times)))
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[13], '-inf', string.format('%d', now * 1000))
end
if due > 0 then redis.call('HSET', KEYS[9], 'key_credit', 1) end
if due > 0 then wake(WAKE_TRAVEL) end
if ARGV[4] == '1' and shift(KEYS[2]) > 0 then wake(WAKE_BACK) end
return { due, 0 }
