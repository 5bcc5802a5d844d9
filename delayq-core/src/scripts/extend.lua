-- extend.lua: push the ack deadline of running deliveries out (lease renewal, Ack::extend).
-- KEYS[1] inflight   KEYS[2] msg
-- ARGV[1] lease ms (new deadline = now + lease), then pairs of id, delivery token
-- Returns one integer per pair: 1 extended, 0 stale.
local deadline = now_ms() + tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  if owned_raw(KEYS[1], KEYS[2], id, ARGV[i + 1]) then
    redis.call('ZADD', KEYS[1], 'XX', deadline, id)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
