-- room/counts.lua: how many wait and how many are inside (unexpired).
-- KEYS: as in room/prelude.lua
-- Returns { waiting, active }.
return { redis.call('ZCARD', KEYS[1]), redis.call('ZCOUNT', KEYS[3], '(' .. now_ms(), '+inf') }
