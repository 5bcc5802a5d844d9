-- history/record.lua: one process's minute of a topic (or of a stream group, a waiting room;
-- schedules' ticks: schedules.lua), merged into its history (`delayq stats --since`, the dashboard's
-- charts). It changes no message. (history/merge.lua is prepended.)
-- KEYS[1] the minutes (HASH), KEYS[2] the hours (HASH), then what ARGV[3] samples:
--   'topic': KEYS[3] delayed, KEYS[4] ready, KEYS[5] inflight, KEYS[6] farinfo (its `count`:
--            messages in far buckets): delayed (due or not), due, in flight
--   'group': KEYS[3] the stream, ARGV[4] the group: its lag (entries not delivered yet, as
--            delayed and due) and its pending entries (as in flight), by XINFO GROUPS
--   'given': ARGV[4..6] the three numbers, sampled by the caller (a room's waiting, 0, inside)
-- ARGV[1] what this process counted since its last write, space-separated: ok retry dead
--   timed_out, then the handler starts per lateness bin (history.rs' LATENESS_BINS_MS)
-- ARGV[2] '1': the counts are of the minute that just ended (a runtime's minute writer, a few
--   seconds after it: filed in the minute of Redis' now less 10 s); '0': of the current minute
--   (the last counts at a shutdown)
-- A point is `<stamp> <ok> <retry> <dead> <timed_out> <delayed> <due> <in flight> <bins...>`,
-- stamp the minute (or hour) since the epoch. It lives in field `stamp % 1440` of the minutes
-- (`stamp % 720` of the hours): a ring, so each hash holds at most a day of minutes (30 days
-- of hours) whatever happens, and a point older than that is overwritten, never trimmed.
-- The counts add up over processes; the backlog is the last sample taken in that minute.
-- Returns the minute written.
local now, minute = history_now(ARGV[2])
local adds = history_adds(ARGV[1])
if not adds then return redis.error_reply('expected 19 counts') end
local kind = ARGV[3]
local backlog = { 0, 0, 0 }
if kind == 'topic' then
  backlog = topic_backlog(KEYS[3], KEYS[4], KEYS[5], KEYS[6], now)
elseif kind == 'group' then
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[3])
  for _, g in ipairs(ok and groups or {}) do
    local f = {}
    for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
    if f['name'] == ARGV[4] then
      local lag = tonumber(f['lag']) or 0
      backlog = { lag, lag, tonumber(f['pending']) or 0 }
    end
  end
elseif kind == 'given' then
  backlog = { tonumber(ARGV[4]) or 0, tonumber(ARGV[5]) or 0, tonumber(ARGV[6]) or 0 }
else
  return redis.error_reply('unknown history kind ' .. tostring(kind))
end
history_merge(KEYS[1], KEYS[2], minute, adds, backlog)
return minute
