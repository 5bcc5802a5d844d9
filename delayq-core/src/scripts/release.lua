-- release.lua: a clean shutdown hands claimed, unfinished deliveries back to `delayed`, due
-- now, and gives back the attempt the claim counted.
-- KEYS[1] delayed   KEYS[2] inflight   KEYS[3] msg
-- ARGV[1] wake channel, then pairs of id, delivery token
-- Returns the number handed back (stale pairs are skipped).
local now = now_ms()
local n = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local m = owned(KEYS[2], KEYS[3], id, ARGV[i + 1])
  if m then
    if m.attempt > 0 then m.attempt = m.attempt - 1 end
    redis.call('HSET', KEYS[3], id, encode(m))
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZADD', KEYS[1], now, id)
    n = n + 1
  end
end
if n > 0 then wake(ARGV[1], 'd') end
return n
