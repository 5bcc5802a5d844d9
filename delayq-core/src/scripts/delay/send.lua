-- send.lua: new messages enter `delayed`, or their far bucket when due later than about two
-- minutes from now (one call for one message or a whole batch).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far buckets the call may touch)
-- then what every message of the call shares, ARGV[3] to ARGV[9]: mode, when_kind,
-- max_attempts, dedup, priority, key, trace; then 3 per message from ARGV[10]: id, when,
-- payload (Redis parses each argument and makes it a Lua string: what a batch shares goes
-- once)
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
-- Returns a string of one character per message, in their order: 'c' created, 'd' duplicate
-- (kept), 'r' replaced (one string: a reply of a bulk string a message costs Redis and the
-- client more than the message's write).
local now = now_ms()
local FIRST = 10
local mode, kind = ARGV[3], ARGV[4]
if kind ~= 'delay' and kind ~= 'at' then
  return redis.error_reply('delayq: send when_kind ' .. tostring(kind))
end
-- Whole messages only, checked before anything is written.
if #ARGV < FIRST - 1 or (#ARGV - FIRST + 1) % 3 ~= 0 then
  return redis.error_reply('delayq: send takes 3 arguments a message after 9, not ' .. #ARGV)
end
-- What every message of the call shares, as a fresh envelope (`due_ms` and `payload` apart).
local fresh = { attempt = 0, token = 0, max_attempts = tonumber(ARGV[5]), enqueued_ms = now,
  last_error = '', dead_reason = '', dedup = tonumber(ARGV[6]), priority = tonumber(ARGV[7]),
  key = ARGV[8], trace = ARGV[9] }

-- Which far buckets the call needs: each message's, and those its id may already be in. The
-- messages as parallel lists (a table a message costs its allocation and its collection).
local ids, dues, times, seen, soon_far = {}, {}, {}, {}, false
local n = 0
for i = FIRST, #ARGV, 3 do
  local id = ARGV[i]
  if seen[id] then return redis.error_reply('delayq: id ' .. id .. ' twice in one send') end
  seen[id] = true
  local due = tonumber(ARGV[i + 1])
  if kind == 'delay' then due = now + due end
  if goes_far(due, now) then
    need(bucket_of(due))
    soon_far = true
  end
  n = n + 1
  ids[n], dues[n] = id, due
end
-- An id's ULID time tells which far bucket it may be in: read only when there may be one.
if soon_far or far_exists() then
  for k = 1, n do
    times[k] = id_time(ids[k])
    need_lookup(ids[k], times[k], soon_far)
  end
end
local missing = missing_buckets()
if missing then return missing end
-- The far buckets it was given, where it looks and writes, must be hashes (or not exist):
-- checked before anything is written, with an answer that names the key (a far bucket is not
-- among the keys the client checks itself).
if soon_far or far_exists() then
  local foreign = foreign_bucket()
  if foreign then return foreign end
end

local old_next = next_due()
local earliest = -1
-- Ids reserved after their message finished (`dedup_for`): looked up only when there are any,
-- in one ZMSCORE for the call (1,000 ids a command).
local reserved = redis.call('EXISTS', KEYS[11]) == 1 and call_in_chunks('ZMSCORE', KEYS[11], ids)
-- Which ids have an envelope already: one HMGET for the call (a new id's field is absent,
-- which costs little), 1,000 ids a command; `enveloped[k]` is the k-th message's, or false.
local enveloped = call_in_chunks('HMGET', KEYS[3], ids)
-- First every look-up, then every write: a call that fails (a key another program wrote with
-- another type) fails before its first write, and a batch writes whole or not at all. What
-- each message's send does: its answer, and where a message it replaces was (`was`).
local outs, wases, strays = {}, {}, {}
for k = 1, n do
  local id = ids[k]
  local outcome, was = 'c', nil
  local until_ms = reserved and tonumber(reserved[k])
  if until_ms and until_ms > now then
    outcome = 'd'
  elseif enveloped[k] ~= false then
    if redis.call('ZSCORE', KEYS[2], id) then
      outcome = 'd'
    elseif redis.call('ZSCORE', KEYS[1], id) then
      if mode == 'replace' then outcome, was = 'r', 'hot' else outcome = 'd' end
    elseif redis.call('ZSCORE', KEYS[12], id) then
      if mode == 'replace' then outcome, was = 'r', 'ready' else outcome = 'd' end
    elseif redis.call('ZSCORE', KEYS[4], id) then
      -- A dead message with this id is done with: the new send starts it afresh.
      was = 'dead'
    else
      -- An envelope in `msg` of no state (a stray): the new send takes its place, unless the
      -- id also waits far (a hand edit), which it is as for any far message.
      local b = far_bucket(id, times[k])
      if b then
        strays[k] = true
        if mode == 'replace' then outcome, was = 'r', b else outcome = 'd' end
      else
        was = 'stray'
      end
    end
  else
    local b = far_bucket(id, times[k])
    if b then
      if mode == 'replace' then outcome, was = 'r', b else outcome = 'd' end
    end
  end
  outs[k], wases[k] = outcome, was
end
-- The priority index, written below and not read above (its type read here once: a new
-- message with the default priority clears an entry left for its id, which would lift it).
local index, foreign_index = key_type(KEYS[14], 'hash')
if foreign_index then return foreign_index end
local unindex = index == 'hash' and fresh.priority == DEFAULT_PRIORITY and {} or nil

-- The messages placed hot are written together, after the loop (see `store_hot`), each
-- envelope the call's head and tail around its due time.
hot_writes = { h = {}, z = {} }
local head, tail = envelope_head(fresh), envelope_tail(fresh)
-- Where each replaced message was, cleared once every message is placed (see far.lua).
local clear = {}
for k = 1, n do
  local id, due, was = ids[k], dues[k], wases[k]
  if outs[k] ~= 'd' then
    -- Token 0 until claimed: claims draw theirs from `seq`, so a token is never reused even
    -- when this id was acked, cancelled or purged and is now sent again.
    local payload = ARGV[FIRST + 3 * k - 1]
    local look, now_in = due, nil
    if goes_far(due, now) then
      local m = { payload = payload, due_ms = due }
      for f, v in pairs(fresh) do m[f] = v end
      look, now_in = place(id, m, now, times[k])
    else
      -- As place() would, without a table: the score is the due time, as in the header.
      local d = int(due)
      store_hot(id, head .. d .. tail .. payload, d, fresh.priority)
    end
    if earliest == -1 or look < earliest then earliest = look end
    if was then
      clear[#clear + 1] = { id = id, t = times[k], was = was, now_in = now_in,
        priority = fresh.priority, stray = strays[k] }
    end
    if unindex then unindex[#unindex + 1] = id end
  end
end
flush_hot_writes()
far_flush()
for _, c in ipairs(clear) do
  if type(c.was) == 'number' then
    far_remove(c.id, c.was, c.t, c.now_in)
    -- The stray envelope beside it goes too, unless the message was placed hot over it.
    if c.stray and c.now_in then redis.call('HDEL', KEYS[3], c.id) end
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
if unindex and #unindex > 0 then call_in_chunks('HDEL', KEYS[14], unindex) end
if n > 0 and fresh.priority ~= DEFAULT_PRIORITY then redis.call('HSET', KEYS[9], 'prio', 1) end
-- Wake the bosses when this send moved the time they must look earlier, or when that time
-- has already come (then a boss may not know of it: a wake-up lost in a reconnect, or a
-- foreign write).
if earliest ~= -1 and (old_next == -1 or earliest < old_next or old_next <= now) then
  wake(WAKE_BOSS)
end
return table.concat(outs)
