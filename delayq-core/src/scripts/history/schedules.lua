-- history/schedules.lua: what one process counted of several schedules' ticks on one topic,
-- each merged into its schedule's history, in one call whatever their number (the names come
-- from message ids, which senders choose). (history/merge.lua is prepended.)
-- KEYS: for each schedule, its minutes, its hours and its record (all in the topic's slot)
-- ARGV[1] '1': the counts are of the minute that just ended (see record.lua); '0': of now
-- ARGV[2..] for each schedule, its counts as record.lua's ARGV[1]
-- Nothing is written for a name whose record is not a schedule's (a HASH with a `kind`): an
-- id that only looked like a tick's.
-- Returns, for each, 1 when written, 0 when not.
local _, minute = history_now(ARGV[1])
local out = {}
for i = 1, #KEYS / 3 do
  local minutes, hours, record = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local adds = history_adds(ARGV[i + 1])
  if not adds then return redis.error_reply('expected 19 counts') end
  out[i] = 0
  if redis.call('TYPE', record)['ok'] == 'hash' and redis.call('HEXISTS', record, 'kind') == 1 then
    history_merge(minutes, hours, minute, adds, { 0, 0, 0 })
    out[i] = 1
  end
end
return out
