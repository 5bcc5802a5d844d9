-- leader/acquire.lua: takes the lease when nobody holds it (SET NX PX), with a fencing token
-- from a counter that only ever grows.
-- KEYS[1] the lease (STRING "<owner> <token>", with a TTL)   KEYS[2] the fencing counter
-- ARGV[1] owner (unique per LeaderLease)   ARGV[2] ttl_ms
-- Returns the token (> 0), or, when the lease is held, minus the ms it has left (so that a
-- contender can try again the moment it lapses).
local left = redis.call('PTTL', KEYS[1])
if left ~= -2 then
  return -math.max(left, 1)
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. token, 'NX', 'PX', ARGV[2])
return token
