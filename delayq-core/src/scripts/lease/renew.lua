-- leader/renew.lua: compare-and-PEXPIRE: extends the lease only while it is still ours.
-- KEYS[1] the lease   ARGV[1] its value ("<owner> <token>")   ARGV[2] ttl_ms
-- Returns 1 renewed, 0 lost.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
