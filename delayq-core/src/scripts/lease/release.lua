-- leader/release.lua: compare-and-DEL: gives the lease up only while it is still ours.
-- KEYS[1] the lease   ARGV[1] its value ("<owner> <token>")
-- Returns 1 released, 0 not ours (expired, or another leads).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
