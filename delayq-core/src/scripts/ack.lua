-- ack.lua: finished deliveries leave `inflight` and their envelopes are deleted.
-- KEYS[1] inflight   KEYS[2] msg
-- ARGV: pairs of id, delivery token
-- Returns one integer per pair: 1 acked, 0 stale (that delivery no longer owns the message).
local out = {}
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  if owned(KEYS[1], KEYS[2], id, ARGV[i + 1]) then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
