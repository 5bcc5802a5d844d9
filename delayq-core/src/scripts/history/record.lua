-- history.lua: one process's minute of a topic (or of a schedule's ticks, a stream group, a
-- waiting room), merged into its history (`delayq stats --since`, the dashboard's charts).
-- Not behind the delay prelude: it changes no message.
-- KEYS[1] the minutes (HASH), KEYS[2] the hours (HASH), then what ARGV[2] samples:
--   'topic': KEYS[3] delayed, KEYS[4] ready, KEYS[5] inflight, KEYS[6] farinfo (its `count`:
--            messages in far buckets): delayed (due or not), due, in flight
--   'group': KEYS[3] the stream, ARGV[3] the group: its lag (entries not delivered yet, as
--            delayed and due) and its pending entries (as in flight), by XINFO GROUPS
--   'schedule': KEYS[3] the schedule's record: nothing sampled; nothing written when the
--            record is gone (an id that only looked like a tick's)
--   'given': ARGV[3..5] the three numbers, sampled by the caller (a room's waiting, 0, inside)
-- ARGV[1] what this process counted since its last write, space-separated: ok retry dead
--   timed_out, then the handler starts per lateness bin (history.rs' LATENESS_BINS_MS)
-- A point is `<stamp> <ok> <retry> <dead> <timed_out> <delayed> <due> <in flight> <bins...>`,
-- stamp the minute (or hour) since the epoch. It lives in field `stamp % 1440` of the minutes
-- (`stamp % 720` of the hours): a ring, so each hash holds at most a day of minutes (30 days
-- of hours) whatever happens, and a point older than that is overwritten, never trimmed.
-- The counts add up over processes; the backlog is the last sample taken in that minute.
-- Returns the minute written, or -1 when nothing was (a schedule that is gone).
local MINUTES, HOURS, FIELDS = 1440, 720, 8
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A writer runs just after a minute ends: its counts belong to the minute that ended.
local minute = math.floor((now - 10000) / 60000)
local adds = {}
for w in string.gmatch(ARGV[1], '%d+') do adds[#adds + 1] = tonumber(w) end
local kind = ARGV[2]
local backlog = { 0, 0, 0 }
if kind == 'topic' then
  local far = tonumber(redis.call('HGET', KEYS[6], 'count') or '0') or 0
  local ready = redis.call('ZCARD', KEYS[4])
  backlog = {
    redis.call('ZCARD', KEYS[3]) + ready + far,
    redis.call('ZCOUNT', KEYS[3], '-inf', string.format('%d', now)) + ready,
    redis.call('ZCARD', KEYS[5]),
  }
elseif kind == 'group' then
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[3])
  for _, g in ipairs(ok and groups or {}) do
    local f = {}
    for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
    if f['name'] == ARGV[3] then
      local lag = tonumber(f['lag']) or 0
      backlog = { lag, lag, tonumber(f['pending']) or 0 }
    end
  end
elseif kind == 'schedule' then
  if redis.call('EXISTS', KEYS[3]) == 0 then return -1 end
elseif kind == 'given' then
  backlog = { tonumber(ARGV[3]) or 0, tonumber(ARGV[4]) or 0, tonumber(ARGV[5]) or 0 }
else
  return redis.error_reply('unknown history kind ' .. tostring(kind))
end
local function merge(key, stamp, ring)
  local slot = string.format('%d', stamp % ring)
  local p = {}
  for w in string.gmatch(redis.call('HGET', KEYS[key], slot) or '', '%d+') do
    p[#p + 1] = tonumber(w)
  end
  if p[1] ~= stamp or #p ~= FIELDS + #adds - 4 then
    p = { stamp }
    for i = 2, FIELDS + #adds - 4 do p[i] = 0 end
  end
  for i = 1, 4 do p[1 + i] = p[1 + i] + adds[i] end
  for i = 1, 3 do p[5 + i] = backlog[i] end
  for i = 5, #adds do p[FIELDS + i - 4] = p[FIELDS + i - 4] + adds[i] end
  for i = 1, #p do p[i] = string.format('%d', p[i]) end
  redis.call('HSET', KEYS[key], slot, table.concat(p, ' '))
end
merge(1, minute, MINUTES)
merge(2, math.floor(minute / 60), HOURS)
return minute
