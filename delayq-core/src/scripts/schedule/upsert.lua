-- upsert.lua: creates or updates a schedule's record, a HASH in its topic's slot (so that
-- the delay queue's tick.lua can fence each tick on it).
-- KEYS[1] the record
-- ARGV[1] kind ('cron' or 'every'), ARGV[2] spec (the pattern, or the interval in ms),
-- ARGV[3] tz, ARGV[4] catch_up ('last', 'none', 'all'), ARGV[5] owner ('code': a
-- #[scheduled] fn's own; 'dynamic': upsert_schedule), ARGV[6] topic,
-- ARGV[7] '1' with the ticks' payload in ARGV[8], '0' without (a #[scheduled] fn's ticks),
-- ARGV[9] the first tick after now under this spec (unix ms), ARGV[10] its anchor (the
-- interval's grid), ARGV[11] misfire_after (ms: how late a tick may be and still be on time).
-- A record whose kind, spec and tz are unchanged (and whose `next` is a time) keeps its next tick (upsert is idempotent,
-- and a restart keeps the grid and what it missed); a changed one starts from ARGV[9], and
-- its `gen` rises (to Redis' time in microseconds, or one more than it was: a record removed
-- and created again does not repeat one), so that tick.lua fences out a producer that still
-- holds the old spec even when the new spec's first tick is the old `next`. The other fields
-- (catch_up, misfire_after, payload, ...) change in place, keeping the next tick and `gen`.
-- A suspended record stays suspended (its `next` the year 9999) through any upsert.
-- Returns { 'created', 'changed' (the ticks' times changed) or 'kept', the first tick that
-- will run after this call (unix ms: a tick produced ahead of its time, `last` after now,
-- else `next`; the year 9999 while suspended) }. It is the call's answer: a producer of
-- another process may produce that tick the moment this returns and move `next` on, so a
-- read of the record after this call may already name the tick after it.
local r = KEYS[1]
local old = redis.call('HMGET', r, 'kind', 'spec', 'tz', 'next', 'gen', 'suspended', 'last')
local out = 'changed'
if not old[4] then
  out = 'created'
elseif old[1] == ARGV[1] and old[2] == ARGV[2] and old[3] == ARGV[3] then
  out = 'kept'
  -- A `next` that is no time up to the year 9999 (the calendar before 0.1 wrote 2^64-1 for
  -- a schedule it lost at a clock change, and a hand can write anything) starts again.
  local next = tonumber(old[4])
  if not next or next ~= next or next < 0 or next > 253402300799999 then out = 'changed' end
end
redis.call('HSET', r, 'kind', ARGV[1], 'spec', ARGV[2], 'tz', ARGV[3], 'catch_up', ARGV[4],
  'owner', ARGV[5], 'topic', ARGV[6], 'misfire_after', ARGV[11])
if ARGV[7] == '1' then
  redis.call('HSET', r, 'payload', ARGV[8])
else
  redis.call('HDEL', r, 'payload')
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local next = old[4]
if out ~= 'kept' then
  local gen = math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), (tonumber(old[5]) or 0) + 1)
  -- A suspended schedule (suspend.lua) stays suspended: its next tick stays the year 9999
  -- until it is resumed, which starts it from its first tick after then.
  next = ARGV[9]
  if old[6] == '1' then next = '253402300799999' end
  redis.call('HSET', r, 'next', next, 'anchor', ARGV[10], 'missed', 0,
    'gen', string.format('%d', gen))
end
-- Ticks written ahead: every one from now up to `last` (the latest written) is waiting, so
-- the first is `last` itself, or for an interval shorter than the lead (every = 200ms) the
-- earliest of the interval's ticks after now that end at `last`. (A cron ticks a second apart
-- at the closest, and the lead is a second: only `last` waits.)
local first = next
local last = tonumber(old[7])
if old[6] ~= '1' and last and last > now_ms and last < (tonumber(next) or math.huge) then
  first = old[7]
  local every = old[1] == 'every' and tonumber(old[2])
  if every and every >= 1 and every < last - now_ms then
    first = string.format('%d', last - (math.ceil((last - now_ms) / every) - 1) * every)
  end
end
return { out, first }
