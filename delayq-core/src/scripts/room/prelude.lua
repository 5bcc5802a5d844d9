-- room/prelude.lua: shared by the waiting-room scripts (prepended when a script is loaded).
--
-- Every room script takes the keys of one room (ns, room r; the hash tag {room:r} keeps them
-- on one cluster slot), in this order:
--   KEYS[1] waiting  ZSET token -> arrival number (from `seq`: strictly increasing)
--   KEYS[2] touched  ZSET token -> last enter/touch (ms); a waiting token untouched for
--                    waiting_ttl expires
--   KEYS[3] active   ZSET token -> when its admission expires (ms)
--   KEYS[4] seq      STRING arrival counter
--   KEYS[5] admits   ZSET "<ms>:<n>" -> ms: what each tick of the last minute admitted
--   KEYS[6] lease    STRING the room's ticking lease ("<owner> <token>"), for fenced ticks
--   KEYS[7] rate     STRING admissions per second over the last minute of ticks (set by
--                    each tick, read by status)
-- A token is in `waiting` (and `touched`) or in `active`, never both: every change is one
-- script. Times are the Redis server's, in ms.
--
-- Line numbers: this prelude is prepended to each script, so a Lua error in a script reports
-- a line number this file's line count higher than the line in the script's own file.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
