-- stream/leave.lua: a consumer that stops leaves the alive set at once, so that the
-- take-over no longer draws it for orphaned entries.
-- KEYS, ARGV[1], ARGV[2]: as in stream/prelude.lua
-- Returns 1 if it was in the set.
return redis.call('ZREM', KEYS[3], ARGV[2])
