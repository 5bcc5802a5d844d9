-- travel.lua (the test kit's only, feature `testing`): time travel. Everything of the topic
-- due within ARGV[3] ms (delayed messages, retry backoffs, far buckets) becomes due now, in
-- due order; each envelope keeps its own due time, so a handler still sees the original one.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far buckets that may be promoted)
-- ARGV[3] ms to travel
-- Returns { messages made due, 1 when far buckets are left to promote (call again) else 0 }.
local now = now_ms()
local d = tonumber(ARGV[3])
local horizon = now + d
promote(horizon)
far_flush()
-- Every score up to the horizon moves back by d: those due already stay first, and the order
-- among all of them is kept.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', horizon, 'WITHSCORES')
local scores = {}
for i = 1, #due, 2 do
  scores[#scores + 1] = tonumber(due[i + 1]) - d
  scores[#scores + 1] = due[i]
end
if #scores > 0 then
  redis.call('ZADD', KEYS[1], unpack(scores))
  wake(WAKE_BOSS)
end
local first = redis.call('ZRANGE', KEYS[7], 0, 0)
local more = 0
if first[1] and promote_at(tonumber(first[1])) <= horizon then more = 1 end
return { #scores / 2, more }
