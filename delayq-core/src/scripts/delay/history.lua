-- history.lua: one process's minute of a topic, merged into the topic's history (`delayq
-- stats --since`, the dashboard's charts). Not behind the delay prelude: it changes no
-- message.
-- KEYS[1] delayed, KEYS[2] ready, KEYS[3] inflight, KEYS[4] farinfo (its `count`: messages in
--   far buckets), KEYS[5] the minutes (HASH), KEYS[6] the hours (HASH)
-- ARGV[1] what this process counted since its last write, space-separated: ok retry dead
--   timed_out, then the handler starts per lateness bin (history.rs' LATENESS_BINS_MS)
-- A point is `<stamp> <ok> <retry> <dead> <timed_out> <delayed> <due> <in flight> <bins...>`,
-- stamp the minute (or hour) since the epoch. It lives in field `stamp % 1440` of the minutes
-- (`stamp % 720` of the hours): a ring, so each hash holds at most a day of minutes (30 days
-- of hours) whatever happens, and a point older than that is overwritten, never trimmed.
-- The counts add up over processes; the backlog is the last sample taken in that minute.
-- Returns the minute written.
local MINUTES, HOURS, FIELDS = 1440, 720, 8
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A writer runs just after a minute ends: its counts belong to the minute that ended.
local minute = math.floor((now - 10000) / 60000)
local adds = {}
for w in string.gmatch(ARGV[1], '%d+') do adds[#adds + 1] = tonumber(w) end
local far = tonumber(redis.call('HGET', KEYS[4], 'count') or '0') or 0
local ready = redis.call('ZCARD', KEYS[2])
local backlog = {
  redis.call('ZCARD', KEYS[1]) + ready + far,
  redis.call('ZCOUNT', KEYS[1], '-inf', string.format('%d', now)) + ready,
  redis.call('ZCARD', KEYS[3]),
}
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
merge(5, minute, MINUTES)
merge(6, math.floor(minute / 60), HOURS)
return minute
