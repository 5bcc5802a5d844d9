-- tick.lua: a schedule's ticks enter its topic, fenced by the schedule's record, so that any
-- number of processes produce each tick exactly once (see delayq-core/src/schedule/).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far buckets the call may touch);
--   the LAST key is the schedule's record, a HASH in the topic's slot (far.lua's declared set
--   holds it too, and never mistakes it for a bucket)
-- ARGV[3] the record's `next` as the caller read it, ARGV[4] its `gen` (absent: '0')
-- ARGV[5] the new `next`
-- ARGV[6] ticks the caller skipped (catch-up) since the last it produced
-- ARGV[7] max_attempts of each tick (0: the listener's default)
-- ARGV[8] the caller's now (unix ms: its estimate of Redis' clock)
-- ARGV[9] misfire_after (ms): a tick due before cutoff = Redis' now - misfire_after is missed
-- ARGV[10], ARGV[11] lo, hi: the caller classified the ticks as missed or on time for a cutoff
--   somewhere in (lo, hi] (no tick of the schedule falls in between); when the caller's now is
--   more than CLOCK_SLACK ms off Redis', the script checks that its own cutoff is in there
-- ARGV[12] n, then n ids: ticks written ahead earlier that the catch-up policy skips if they
--   still wait never claimed in `delayed` (token 0: a tick a clean shutdown handed back was
--   claimed, and stays) and are due before the cutoff: they are removed and counted as missed,
--   before any consumer claims them
-- then 2 per tick: id, its time (unix ms: the tick is due then)
-- A tick's payload is the record's `payload`; without one (a #[scheduled] fn's own schedule)
-- it is {"missed":N}, N the ticks skipped before it (on the first tick of the call only).
-- Returns { 'stale', next, gen, last } when the record's `next` or `gen` is not the caller's
-- (another process produced these ticks, or the schedule changed): the record's current
-- fields (next is nil when the record is gone, last when no tick was written yet); { 'clock', Redis' now } when the caller's clock is more than a
-- second ahead of Redis' or its classification does not hold at Redis' cutoff (nothing
-- written: plan again with that now); else the number of ticks created.
local CLOCK_SLACK = 250
local record = KEYS[#KEYS]
local fence = redis.call('HMGET', record, 'next', 'gen', 'last')
local gen = fence[2] or '0'
if fence[1] ~= ARGV[3] or gen ~= ARGV[4] then return { 'stale', fence[1], gen, fence[3] } end
local now = now_ms()
local cutoff = math.max(now - tonumber(ARGV[9]), 0)
-- Within CLOCK_SLACK of Redis' clock the caller's classification stands (a round trip or a
-- busy Redis puts it that far off, and a threshold of seconds does not notice); further off,
-- only if it holds at Redis' own cutoff.
local skew = math.abs(tonumber(ARGV[8]) - now)
if tonumber(ARGV[8]) > now + 1000 or (skew > CLOCK_SLACK
    and (cutoff <= tonumber(ARGV[10]) or cutoff > tonumber(ARGV[11]))) then
  return { 'clock', now }
end

local n_stale = tonumber(ARGV[12])
local first_tick = 13 + n_stale
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
-- Before the first write (see far.lua; the record, the last key, is a hash).
if soon_far or far_exists() then
  local foreign = foreign_bucket()
  if foreign then return foreign end
end

local payload = redis.call('HGET', record, 'payload')
local missed = tonumber(ARGV[6]) + (tonumber(redis.call('HGET', record, 'missed')) or 0)
for i = 13, first_tick - 1 do
  local id = ARGV[i]
  local set = KEYS[1]
  local due = tonumber(redis.call('ZSCORE', set, id))
  if not due then
    -- Due and waiting in `ready` (a topic with priorities).
    due = redis.call('ZSCORE', KEYS[12], id)
    if due then due, set = ready_due(due), KEYS[12] end
  end
  if due and due < cutoff then
    local m = decode(redis.call('HGET', KEYS[3], id))
    if m and m.token == 0 then
      redis.call('ZREM', set, id)
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
    local m = { attempt = 0, token = 0, max_attempts = tonumber(ARGV[7]), enqueued_ms = now,
      due_ms = s.due, last_error = '', dead_reason = '', trace = '', payload = p }
    local look = place(s.id, m, now, s.t)
    if earliest == -1 or look < earliest then earliest = look end
    created = created + 1
  end
end
far_flush()
if #batch > 0 then
  redis.call('HSET', record, 'next', ARGV[5], 'missed', 0, 'last', batch[#batch].due)
else
  redis.call('HSET', record, 'next', ARGV[5], 'missed', missed)
end
-- As in send.lua: wake the bosses when the time they must look moved earlier or has come.
if earliest ~= -1 and (old_next == -1 or earliest < old_next or old_next <= now) then
  wake(WAKE_BOSS)
end
return created
