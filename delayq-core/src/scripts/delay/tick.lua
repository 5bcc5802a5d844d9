-- tick.lua: a schedule's ticks enter its topic, fenced by the schedule's record, so that any
-- number of processes produce each tick exactly once (see delayq-core/src/schedule/).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far buckets the call may touch);
--   the LAST key is the schedule's record, a HASH in the topic's slot (far.lua's declared set
--   holds it too, and never mistakes it for a bucket)
-- ARGV[3] the record's `next` as the caller read it
-- ARGV[4] the new `next`
-- ARGV[5] ticks the caller skipped (catch-up) since the last it produced
-- ARGV[6] max_attempts of each tick (0: the listener's default)
-- ARGV[7] stale before (unix ms), ARGV[8] n, then n ids: ticks written ahead earlier that the
--   catch-up policy skips if they still wait unclaimed in `delayed` (never run, due before
--   ARGV[7]): they are removed and counted as missed, before any consumer claims them
-- then 2 per tick: id, its time (unix ms: the tick is due then)
-- A tick's payload is the record's `payload`; without one (a #[scheduled] fn's own schedule)
-- it is {"missed":N}, N the ticks skipped before it (on the first tick of the call only).
-- Returns 'stale' when the record's `next` is not ARGV[3] (another process produced these
-- ticks, or the schedule changed or is gone); else the number of ticks created.
local record = KEYS[#KEYS]
if redis.call('HGET', record, 'next') ~= ARGV[3] then return 'stale' end
local now = now_ms()

local stale_before, n_stale = tonumber(ARGV[7]), tonumber(ARGV[8])
local first_tick = 9 + n_stale
local batch, soon_far = {}, false
for i = first_tick, #ARGV, 2 do
  local due = tonumber(ARGV[i + 1])
  if goes_far(due, now) then
    need(bucket_of(due))
    soon_far = true
  end
  batch[#batch + 1] = { id = ARGV[i], due = due, t = id_time(ARGV[i]) }
end
for _, s in ipairs(batch) do need_lookup(s.id, s.t, soon_far) end
local missing = missing_buckets()
if missing then return missing end

local payload = redis.call('HGET', record, 'payload')
local missed = tonumber(ARGV[5]) + (tonumber(redis.call('HGET', record, 'missed')) or 0)
for i = 9, first_tick - 1 do
  local id = ARGV[i]
  local due = tonumber(redis.call('ZSCORE', KEYS[1], id))
  if due and due < stale_before then
    local m = decode(redis.call('HGET', KEYS[3], id))
    if m and m.attempt == 0 then
      redis.call('ZREM', KEYS[1], id)
      redis.call('HDEL', KEYS[3], id)
      missed = missed + 1
    end
  end
end
local old_next = next_due()
local earliest, created = -1, 0
for k, s in ipairs(batch) do
  -- A tick with this id already here (sent by hand, or dead) is left as it is.
  if redis.call('HEXISTS', KEYS[3], s.id) == 0 and not far_bucket(s.id, s.t) then
    local p = payload
    if not p then p = '{"missed":' .. (k == 1 and missed or 0) .. '}' end
    local m = { attempt = 0, token = 0, max_attempts = tonumber(ARGV[6]), enqueued_ms = now,
      due_ms = s.due, last_error = '', dead_reason = '', trace = '', payload = p }
    local look = place(s.id, m, now, s.t)
    if earliest == -1 or look < earliest then earliest = look end
    created = created + 1
  end
end
far_flush()
if #batch > 0 then
  redis.call('HSET', record, 'next', ARGV[4], 'missed', 0, 'last', batch[#batch].due)
else
  redis.call('HSET', record, 'next', ARGV[4], 'missed', missed)
end
-- As in send.lua: wake the bosses when the time they must look moved earlier or has come.
if earliest ~= -1 and (old_next == -1 or earliest < old_next or old_next <= now) then
  wake(WAKE_BOSS)
end
return created
