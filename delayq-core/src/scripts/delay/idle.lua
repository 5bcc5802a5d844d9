-- idle.lua (the test kit's only, feature `testing`): what keeps a topic from being idle.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- Returns { messages due now (hot, or in a far bucket whose promotion has come), claimed (and
-- flow steps that ended and are not settled in their flow yet: their dependents are on the way) }.
local now = now_ms()
local due = redis.call('ZCOUNT', KEYS[1], '-inf', now) + redis.call('ZCARD', KEYS[12])
local first = redis.call('ZRANGE', KEYS[7], 0, 0)
if first[1] and promote_at(tonumber(first[1])) <= now then due = due + 1 end
return { due, inflight_count() + redis.call('ZCARD', KEYS[18]) }
