-- started.lua: the start's first steps are all in their topics (sent by the start, or again
-- by the sweep of its intent): `unsent` goes (see create.lua), and the flow is kept for good
-- while it runs.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- Returns 1, or 0 (no such flow).
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[1], 'unsent')
started(redis.call('HGET', KEYS[1], 'state'))
return 1
