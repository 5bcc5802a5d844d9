-- leader/acquire.lua: takes the lease when nobody holds it (SET NX PX), with a fencing token
-- from a counter that only ever grows.
-- KEYS[1] the lease (STRING "<owner> <token>", with a TTL)   KEYS[2] the fencing counter
-- ARGV[1] owner (unique per LeaderLease)   ARGV[2] ttl_ms
-- Returns the token, or false when the lease is held.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return false
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. token, 'NX', 'PX', ARGV[2])
return token
