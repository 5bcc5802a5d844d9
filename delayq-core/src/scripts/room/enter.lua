-- room/enter.lua: a new token joins the end of the line.
-- KEYS: as in room/prelude.lua   ARGV[1] the token
-- Returns its 1-based place in line.
local now = now_ms()
local arrival = redis.call('INCR', KEYS[4])
redis.call('ZADD', KEYS[1], arrival, ARGV[1])
redis.call('ZADD', KEYS[2], now, record(arrival, ARGV[1]))
return redis.call('ZCOUNT', KEYS[1], '(' .. admitted_upto(), arrival)
