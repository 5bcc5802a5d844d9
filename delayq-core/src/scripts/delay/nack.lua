-- nack.lua: a failed delivery goes back to `delayed` (or a far bucket) after a backoff, or to `dead` once it has
-- used max_attempts (or at once when the caller dead-letters it).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far bucket of a long backoff)
-- ARGV[3] id   ARGV[4] delivery token   ARGV[5] backoff ms
-- ARGV[6] error text (kept as last_error)   ARGV[7] default max_attempts
-- ARGV[8] dead reason: '' to retry while attempts remain, else dead-letter now with it
-- ARGV[9] '1' when the attempt does not count (retry_after: back after the backoff whatever
-- attempts remain, its attempt handed back); 't' when the run was stopped at its listener's
-- `timeout` (a failure like any other, also counted as a `timeout` outcome); else '0'
-- ARGV[10] dead_max   ARGV[11] dead_ttl ms (see trim_dead)
-- Returns 'retry', 'dead <dead letters dropped>' or 'stale'.
local id = ARGV[3]
local m = owned(id, ARGV[4])
if not m then return 'stale' end
local now = now_ms()
local due = now + tonumber(ARGV[5])
local max = attempts_allowed(m, ARGV[7])
local later = ARGV[9] == '1' and ARGV[8] == ''
if later and m.attempt > 0 then m.attempt = m.attempt - 1 end
if ARGV[8] == '' and (later or m.attempt < max) and goes_far(due, now) then
  need(bucket_of(due))
end
local missing = missing_buckets()
if missing then return missing end
-- Before the first write (see far.lua): the message must not leave `inflight` for nowhere.
local foreign = foreign_bucket()
if foreign then return foreign end
redis.call('ZREM', KEYS[2], id)
claim_ended(id)
if ARGV[9] == 't' then count('timeout', 1, now) end
m.last_error = ARGV[6]
if ARGV[8] ~= '' or (not later and m.attempt >= max) then
  local reason = ARGV[8]
  if reason == '' then reason = string.format('failed %d of max_attempts %d', m.attempt, max) end
  bury(id, m, reason, now)
  count('dead', 1, now)
  return 'dead ' .. trim_dead(now, ARGV[10], ARGV[11])
end
local old_next = next_due()
m.due_ms = due
-- A long backoff puts the message in a far bucket, like a send (placed hot, it overwrites
-- its envelope in `msg`; placed far, the envelope goes after, see far.lua).
local look, now_in = place(id, m, now, id_time(id))
if now_in then redis.call('HDEL', KEYS[3], id) end
far_flush()
if old_next == -1 or look < old_next then wake(WAKE_BOSS) end
count('retry', 1, now)
return 'retry'
