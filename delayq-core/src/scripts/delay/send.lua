-- send.lua: new messages enter `delayed`, or their far bucket when due later than about two
-- minutes from now (one call for one message or a whole batch).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far buckets the call may touch)
-- then 10 per message from ARGV[3]: id, mode, when_kind, when, max_attempts, dedup, priority,
-- key, trace, payload
--   mode: 'new'     keep an existing message with that id (-> duplicate)
--         'replace' replace a pending (delayed, far or dead) one with that id
--   when_kind: 'delay' (ms from the server's now) or 'at' (unix ms)
--   dedup: ms the id stays reserved once the message finished (`dedup_for`), or 0
--   priority: 0-255, higher claimed first among due messages (DEFAULT_PRIORITY: none); the
--     first message with another one marks the topic (`prio` in KEYS[9]): from then on its
--     claims go through `ready` (see prelude.lua)
--   key: the message key `rate_per_key` counts by (`SendOptions::key`), or ''
--   trace: the sender's W3C traceparent, or ''
-- An id reserved in `done` (KEYS[11], see `reserve`) is a duplicate, whatever the mode.
-- The ids of one call are distinct.
-- Returns one code per message: 'created', 'duplicate' or 'replaced'.
local now = now_ms()
-- A message's number from its argument; the usual values without `tonumber`, which costs
-- about 1,000 instructions (strtod).
local function arg_num(s)
  if s == '0' then return 0 end
  if s == '128' then return 128 end
  return tonumber(s)
end

-- Which far buckets the call needs: each message's, and those its id may already be in.
local batch, seen, soon_far, prioritized = {}, {}, false, false
for i = 3, #ARGV, 10 do
  local id, kind = ARGV[i], ARGV[i + 2]
  if seen[id] then return redis.error_reply('delayq: id ' .. id .. ' twice in one send') end
  seen[id] = true
  local due = tonumber(ARGV[i + 3])
  if kind == 'delay' then due = now + due end
  if goes_far(due, now) then
    need(bucket_of(due))
    soon_far = true
  end
  batch[#batch + 1] = { i = i, id = id, due = due, t = id_time(id) }
  if arg_num(ARGV[i + 6]) ~= DEFAULT_PRIORITY then prioritized = true end
end
for _, s in ipairs(batch) do need_lookup(s.id, s.t, soon_far) end
local missing = missing_buckets()
if missing then return missing end

local old_next = next_due()
local earliest = -1
-- Ids reserved after their message finished (`dedup_for`): looked up only when there are any.
local reserved = redis.call('EXISTS', KEYS[11]) == 1
-- Which ids have an envelope already: one HMGET for the call (a new id's field is absent,
-- which costs little), 1,000 ids a command; `enveloped[k]` is the k-th message's, or false.
local ids = {}
for k = 1, #batch do ids[k] = batch[k].id end
local enveloped = call_in_chunks('HMGET', KEYS[3], ids)
-- The messages placed hot are written together, after the loop (see `to_delayed`).
hot_writes = { h = {}, z = {} }
local out = {}
-- Where each replaced message was, cleared once every message is placed (see far.lua).
local clear = {}
for k, s in ipairs(batch) do
  local id, mode, i = s.id, ARGV[s.i + 1], s.i
  local outcome, was = 'created', nil
  local until_ms = reserved and tonumber(redis.call('ZSCORE', KEYS[11], id))
  if until_ms and until_ms > now then
    outcome = 'duplicate'
  elseif enveloped[k] ~= false then
    if redis.call('ZSCORE', KEYS[2], id) then
      outcome = 'duplicate'
    elseif redis.call('ZSCORE', KEYS[1], id) then
      if mode == 'replace' then outcome, was = 'replaced', 'hot' else outcome = 'duplicate' end
    elseif redis.call('ZSCORE', KEYS[12], id) then
      if mode == 'replace' then outcome, was = 'replaced', 'ready' else outcome = 'duplicate' end
    elseif redis.call('ZSCORE', KEYS[4], id) then
      -- A dead message with this id is done with: the new send starts it afresh.
      was = 'dead'
    else
      was = 'stray' -- an envelope in `msg` of no state: the new send takes its place
    end
  else
    local b = far_bucket(id, s.t)
    if b then
      if mode == 'replace' then outcome, was = 'replaced', b else outcome = 'duplicate' end
    end
  end
  if outcome ~= 'duplicate' then
    -- Token 0 until claimed: claims draw theirs from `seq`, so a token is never reused even
    -- when this id was acked, cancelled or purged and is now sent again.
    local m = { attempt = 0, token = 0, max_attempts = arg_num(ARGV[i + 4]), enqueued_ms = now,
      due_ms = s.due, last_error = '', dead_reason = '', dedup = arg_num(ARGV[i + 5]),
      priority = arg_num(ARGV[i + 6]), key = ARGV[i + 7], trace = ARGV[i + 8],
      payload = ARGV[i + 9] }
    local look, now_in = place(id, m, now, s.t)
    if earliest == -1 or look < earliest then earliest = look end
    if was then
      clear[#clear + 1] = { id = id, t = s.t, was = was, now_in = now_in, priority = m.priority }
    end
  end
  out[#out + 1] = outcome
end
flush_hot_writes()
far_flush()
for _, c in ipairs(clear) do
  if type(c.was) == 'number' then
    far_remove(c.id, c.was, c.t, c.now_in)
  else
    if c.was == 'dead' then redis.call('ZREM', KEYS[4], c.id) end
    -- Out of `ready` wherever it went: it is due again at its new time.
    if c.was == 'ready' then redis.call('ZREM', KEYS[12], c.id) end
    -- The replaced message's priority is not this one's (place() noted this one's, hot).
    if c.was == 'hot' and (c.now_in or c.priority == DEFAULT_PRIORITY) then
      redis.call('HDEL', KEYS[14], c.id)
    end
    -- Placed hot, the message overwrote its entries in `delayed` and `msg`; placed far, it
    -- leaves them.
    if c.now_in then
      if c.was == 'hot' then redis.call('ZREM', KEYS[1], c.id) end
      redis.call('HDEL', KEYS[3], c.id)
    end
  end
end
far_flush()
if prioritized then redis.call('HSET', KEYS[9], 'prio', 1) end
-- Wake the bosses when this send moved the time they must look earlier, or when that time
-- has already come (then a boss may not know of it: a wake-up lost in a reconnect, or a
-- foreign write).
if earliest ~= -1 and (old_next == -1 or earliest < old_next or old_next <= now) then
  wake(WAKE_BOSS)
end
return out
