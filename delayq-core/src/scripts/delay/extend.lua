-- extend.lua: push the ack deadline of running deliveries out (lease renewal, Ack::extend).
-- A deadline is never moved earlier: a user's `extend(10 min)` survives the runtime's
-- shorter lease renewals.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] lease ms (new deadline = now + lease, unless it is already later), then pairs of
-- id, delivery token
-- Returns one integer per pair: 1 owned (deadline now at least that late), 0 stale.
local deadline = now_ms() + tonumber(ARGV[3])
local out = {}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  if owned_raw(id, ARGV[i + 1]) then
    redis.call('ZADD', KEYS[2], 'XX', 'GT', deadline, id)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
