-- suspend.lua: suspends or resumes a schedule (the dashboard's and `delayq schedules
-- suspend|resume`).
-- KEYS[1] the record
-- ARGV[1] 'suspend' or 'resume'; for 'resume', ARGV[2] the first tick after now under its
-- spec (unix ms) and ARGV[3] its anchor.
-- Suspended, the record's `next` is the year 9999 (MAX_DUE_MS, which producers never reach
-- and `schedules` does not count as stalled) and `suspended` is 1; its `gen` rises, so that a
-- producer that planned ticks before is fenced out (tick.lua) and reads the record again.
-- A tick written ahead before (about a second at most) still runs. Resumed, the schedule
-- goes on from its first tick after now: what it missed while suspended is not caught up.
-- An upsert (a runtime starting with the `#[scheduled]` fn) keeps either state.
-- Returns 'none' (no record), 'suspended', 'already_suspended', 'resumed' or 'not_suspended'.
local MAX_DUE_MS = '253402300799999'
local r = KEYS[1]
local old = redis.call('HMGET', r, 'next', 'gen', 'suspended')
if not old[1] then return 'none' end
local suspended = old[3] == '1'
if ARGV[1] == 'suspend' and suspended then return 'already_suspended' end
if ARGV[1] == 'resume' and not suspended then return 'not_suspended' end
local t = redis.call('TIME')
local gen = string.format('%d',
  math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), (tonumber(old[2]) or 0) + 1))
if ARGV[1] == 'suspend' then
  redis.call('HSET', r, 'suspended', '1', 'next', MAX_DUE_MS, 'gen', gen)
  return 'suspended'
end
redis.call('HDEL', r, 'suspended')
redis.call('HSET', r, 'next', ARGV[2], 'anchor', ARGV[3], 'missed', 0, 'gen', gen)
return 'resumed'
