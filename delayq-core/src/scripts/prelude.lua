-- prelude.lua: shared by every delayq script (prepended when the script is loaded).
--
-- Every script of a topic takes the same keys, in this order:
--   KEYS[1] delayed   KEYS[2] inflight   KEYS[3] msg   KEYS[4] dead   KEYS[5] seq
--   KEYS[6] stats (outcome counters, see `count` below)
--   KEYS[7] far   KEYS[8] where   KEYS[9] farinfo (far buckets, see "Far buckets" below)
-- and ARGV[1] is the topic's wake channel, ARGV[2] the command that publishes on it: PUBLISH
-- on a single server, SPUBLISH (sharded, Redis 7) on a cluster, so that a wake-up reaches only
-- the shard that owns the topic. Each script's own arguments follow from ARGV[3].
--
-- Envelope, the value stored in ns:{t}:msg under a message id (decoded into a table whose
-- fields have the names of `Envelope`'s in envelope.rs):
--   "1 <attempt> <token> <max_attempts> <enqueued_ms> <due_ms> <error_len> <reason_len>\n"
--   .. last_error .. dead_reason .. payload
-- or, for a message sent from inside a traced span, with a ninth header field and the
-- sender's W3C `traceparent` between the reason and the payload:
--   "1 ... <reason_len> <trace_len>\n" .. last_error .. dead_reason .. trace .. payload
-- attempt:  handler runs that counted (a clean shutdown hands one back)
-- token:    the fence token of the current (last) claim, drawn from the topic's `seq` counter,
--           so it is unique in the topic for all time, even when an id is sent again after an
--           ack; a delivery must present it to ack/nack/extend/release. 0 = never claimed.
-- max_attempts: 0 means "the listener's default"
-- Times are milliseconds on the Redis server's clock.
--
-- Line numbers: this prelude is prepended to each script, so a Lua error in a script reports
-- a line number this file's line count higher than the line in the script's own file.

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function now_ms()
  return math.floor(now_us() / 1000)
end

local function decode(raw)
  if type(raw) ~= 'string' then return nil end
  local nl = string.find(raw, '\n', 1, true)
  if not nl then return nil end
  local v, a, d, m, e, due, el, rl, tl = string.match(string.sub(raw, 1, nl - 1),
    '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) ?(%d*)$')
  if v ~= '1' then return nil end
  el = tonumber(el)
  rl = tonumber(rl)
  tl = tonumber(tl) or 0
  if nl + el + rl + tl > #raw then return nil end
  return {
    attempt = tonumber(a), token = tonumber(d), max_attempts = tonumber(m),
    enqueued_ms = tonumber(e), due_ms = tonumber(due),
    last_error = string.sub(raw, nl + 1, nl + el),
    dead_reason = string.sub(raw, nl + el + 1, nl + el + rl),
    trace = string.sub(raw, nl + el + rl + 1, nl + el + rl + tl),
    payload = string.sub(raw, nl + el + rl + tl + 1),
  }
end

local function encode(m)
  local header = string.format('1 %d %d %d %d %d %d %d', m.attempt, m.token, m.max_attempts,
    m.enqueued_ms, m.due_ms, #m.last_error, #m.dead_reason)
  if #m.trace > 0 then header = header .. ' ' .. #m.trace end
  return header .. '\n' .. m.last_error .. m.dead_reason .. m.trace .. m.payload
end

-- The score of the earliest member of a sorted set, or -1 when it is empty.
local function head_score(key)
  local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if head[2] then return tonumber(head[2]) end
  return -1
end

-- The delivery token of an envelope, read from its header alone; nil when the header does
-- not parse.
local function token_of(raw)
  if type(raw) ~= 'string' then return nil end
  return tonumber(string.match(raw, '^1 %d+ (%d+) '))
end

-- The envelope of a new claim: attempt one higher and the claim's token, rewriting only the
-- header; nil when the header does not parse.
local function bump(raw, token)
  if type(raw) ~= 'string' then return nil end
  local a, rest, body = string.match(raw, '^1 (%d+) %d+ ([%d ]+\n)()')
  if not a then return nil end
  return string.format('1 %d %d ', a + 1, token) .. rest .. string.sub(raw, body)
end

-- The raw envelope of `id` when the delivery holding `token` still owns it (it is in flight
-- and no later claim happened), else nil. Reads only the header.
local function owned_raw(id, token)
  if not redis.call('ZSCORE', KEYS[2], id) then return nil end
  local raw = redis.call('HGET', KEYS[3], id)
  if token_of(raw) == tonumber(token) then return raw end
  return nil
end

-- The same, decoded, for scripts that rewrite the envelope.
local function owned(id, token)
  local raw = owned_raw(id, token)
  if raw then return decode(raw) end
  return nil
end

-- What a wake-up tells the runtime (its Rust twins are in scripts.rs).
local WAKE_BOSS = 'd' -- the head of `delayed` moved earlier: the boss looks again
local WAKE_BACK = 'i' -- a claim landed in an empty `inflight`: the back pool schedules it

-- Publishes a wake-up of `kind` on the topic's wake channel (ARGV[1], with ARGV[2]).
local function wake(kind)
  redis.call(ARGV[2], ARGV[1], kind)
end

local function attempts_allowed(m, default)
  if m.max_attempts > 0 then return m.max_attempts end
  return tonumber(default)
end

-- Outcome counters for `delayq stats`: KEYS[6] maps `<outcome>:<10 s bucket>` to a count
-- (outcome: ok, retry, dead). When a bucket starts, buckets older than two minutes go, so the
-- hash stays at a few dozen fields whatever the traffic.
local STATS_BUCKET_MS = 10000
local STATS_KEEP_BUCKETS = 12
local function count(outcome, n, now)
  if n == 0 then return end
  local bucket = math.floor(now / STATS_BUCKET_MS)
  if redis.call('HINCRBY', KEYS[6], outcome .. ':' .. bucket, n) == n then
    for _, field in ipairs(redis.call('HKEYS', KEYS[6])) do
      local b = tonumber(string.match(field, ':(%d+)$'))
      if not b or b < bucket - STATS_KEEP_BUCKETS then redis.call('HDEL', KEYS[6], field) end
    end
  end
end

-- Moves an id to the dead letters, keeping its envelope (with the reason) in msg.
local function bury(id, m, reason, now)
  m.dead_reason = reason
  redis.call('HSET', KEYS[3], id, encode(m))
  redis.call('ZADD', KEYS[4], now, id)
end

-- Far buckets. The hot keys (`delayed`, `msg`) hold only messages due within about two
-- minutes; one due later waits in the far bucket of its due time, b = floor(due / width),
-- the HASH KEYS[7] .. ':' .. b (id -> far record), until the bucket is promoted: a whole
-- bucket before it starts, its messages move into the hot keys (`promote`, run by claim_due).
-- So the hot keys stay small however many messages wait for days, and a far message costs one
-- hash entry. KEYS[7] `far` is a ZSET of the buckets not promoted yet (member b, score a
-- lower bound of the earliest due time in it); KEYS[9] `farinfo` a HASH with `count` (messages
-- in far buckets) and `width` (the bucket width in ms, fixed when the topic's first far
-- message is stored). A message is found by id without an index when the id is generated:
-- a ULID of its due time, whose bucket is its time's. KEYS[8] `where` (id -> bucket) lists the
-- others (user ids, and a generated id whose time falls in another bucket than its due time).
local DEFAULT_BUCKET_MS = 60000
-- Messages one call promotes at most (it passes them to single commands with `unpack`).
local PROMOTE_MAX = 1000

local bucket_width = nil
local function width()
  if not bucket_width then
    bucket_width = tonumber(redis.call('HGET', KEYS[9], 'width')) or DEFAULT_BUCKET_MS
  end
  return bucket_width
end

local width_stored = false

local function bucket_of(ms)
  return math.floor(ms / width())
end

-- When bucket b is promoted: a whole bucket before it starts.
local function promote_at(b)
  return (b - 1) * width()
end

-- Bucket keys and member names, made once per bucket and call.
local far_keys, far_members = {}, {}
local function far_key(b)
  local key = far_keys[b]
  if not key then
    far_members[b] = string.format('%d', b)
    key = KEYS[7] .. ':' .. far_members[b]
    far_keys[b] = key
  end
  return key
end
local function far_member(b)
  far_key(b)
  return far_members[b]
end

-- Changes to `far` and the far count, gathered while a script places messages and written
-- once by far_flush() (a send of 10,000 messages writes them once, not 10,000 times). Every
-- script that calls place() calls far_flush() before it returns.
local far_delta, far_heads = 0, {}
local function far_count(delta)
  far_delta = far_delta + delta
end
local function far_flush()
  for b, due in pairs(far_heads) do
    redis.call('ZADD', KEYS[7], 'LT', due, far_member(b))
  end
  far_heads = {}
  if far_delta ~= 0 then redis.call('HINCRBY', KEYS[9], 'count', far_delta) end
  far_delta = 0
end

-- The time (unix ms) of a ULID: its first 10 characters, Crockford base 32; nil for an id
-- that is not one.
local CROCKFORD = nil
local function id_time(id)
  if #id ~= 26 then return nil end
  if not CROCKFORD then
    CROCKFORD = {}
    local digits = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
    for i = 1, 32 do CROCKFORD[string.byte(digits, i)] = i - 1 end
  end
  local t = 0
  for i = 1, 10 do
    local v = CROCKFORD[string.byte(id, i)]
    if not v then return nil end
    t = t * 32 + v
  end
  return t
end

-- Whether KEYS[7] / KEYS[8] exist, read once per call (place() creates them).
local any_far, any_where = nil, nil

-- The far bucket that holds `id` (whose ULID time is `t`, nil for another id), or nil.
local function far_bucket(id, t)
  if any_far == nil then
    any_far = redis.call('EXISTS', KEYS[7]) == 1 or far_delta ~= 0
  end
  if not any_far then return nil end
  if t then
    local b = bucket_of(t)
    if redis.call('HEXISTS', far_key(b), id) == 1 then return b end
  end
  if any_where == nil then any_where = redis.call('EXISTS', KEYS[8]) == 1 end
  if not any_where then return nil end
  local b = redis.call('HGET', KEYS[8], id)
  if b then return tonumber(b) end
  return nil
end

-- A far record: a fresh message (never claimed, no error, no option, no trace) as
--   "F<due - start of its bucket> <due - enqueued>\n" .. payload
-- with both numbers in base 36 (ms): 12 bytes of header for a message due in an hour, which
-- keeps a 96-byte payload's record in a 112-byte allocation. Any other message is stored as
-- its full envelope.
local function base36(n)
  local digits = {}
  repeat
    local d = n % 36
    digits[#digits + 1] = d < 10 and 48 + d or 87 + d -- '0'.., 'a'..
    n = (n - d) / 36
  until n == 0
  local k = #digits
  for i = 1, math.floor(k / 2) do
    digits[i], digits[k + 1 - i] = digits[k + 1 - i], digits[i]
  end
  return string.char(unpack(digits))
end

local function far_encode(m, b)
  if m.attempt == 0 and m.token == 0 and m.max_attempts == 0 and m.last_error == ''
      and m.dead_reason == '' and m.trace == '' and m.due_ms >= m.enqueued_ms then
    return 'F' .. base36(m.due_ms - b * width()) .. ' ' .. base36(m.due_ms - m.enqueued_ms) .. '\n'
      .. m.payload
  end
  return encode(m)
end

local function far_decode(raw, b)
  if type(raw) ~= 'string' then return nil end
  if string.byte(raw, 1) ~= 70 then return decode(raw) end -- not 'F'
  local offset, delay, body = string.match(raw, '^F(%w+) (%w+)\n()')
  offset, delay = tonumber(offset or '', 36), tonumber(delay or '', 36)
  if not offset or not delay then return nil end
  local due = b * width() + offset
  return {
    attempt = 0, token = 0, max_attempts = 0, enqueued_ms = due - delay, due_ms = due,
    last_error = '', dead_reason = '', trace = '', payload = string.sub(raw, body),
  }
end

-- Stores envelope `m` of `id` (ULID time `t`, or nil) where its due time puts it: its far
-- bucket while that bucket's promotion is still ahead, else the hot keys. Returns when the
-- boss must look because of it: the due time, or the bucket's promotion. (Then far_flush().)
local function place(id, m, now, t)
  local b = bucket_of(m.due_ms)
  if promote_at(b) <= now then
    redis.call('HSET', KEYS[3], id, encode(m))
    redis.call('ZADD', KEYS[1], m.due_ms, id)
    return m.due_ms
  end
  if not width_stored then
    redis.call('HSETNX', KEYS[9], 'width', width())
    width_stored = true
  end
  redis.call('HSET', far_key(b), id, far_encode(m, b))
  local head = far_heads[b]
  if not head or m.due_ms < head then far_heads[b] = m.due_ms end
  if not t or bucket_of(t) ~= b then
    redis.call('HSET', KEYS[8], id, far_member(b))
    any_where = true
  end
  any_far = true
  far_count(1)
  return promote_at(b)
end

-- Removes `id` from far bucket b. (Then far_flush().)
local function far_remove(id, b)
  local key = far_key(b)
  redis.call('HDEL', key, id)
  redis.call('HDEL', KEYS[8], id)
  if redis.call('EXISTS', key) == 0 then
    redis.call('ZREM', KEYS[7], far_member(b))
    far_heads[b] = nil
  end
  far_count(-1)
end

-- When the boss must look next: the head of `delayed` or the promotion of the first far
-- bucket, whichever is earlier; -1 when there is neither.
-- (promote() leaves in far_head the first far bucket it saw and left, false for none, so
-- that claim_due need not read it again.)
local far_head = nil
local function next_due()
  local due = head_score(KEYS[1])
  local b = far_head
  if b == nil then
    local first = redis.call('ZRANGE', KEYS[7], 0, 0)
    b = first[1] and tonumber(first[1]) or false
  end
  if b then
    local p = promote_at(b)
    if due == -1 or p < due then due = p end
  end
  return due
end

-- Moves the messages of far buckets whose promotion time has come into the hot keys, at most
-- PROMOTE_MAX a call (the boss calls again while one is due). A far record that does not parse
-- goes to the hot keys as it is, due now, so that the claim dead-letters it.
local function promote(now)
  local moved = 0
  while moved < PROMOTE_MAX do
    local first = redis.call('ZRANGE', KEYS[7], 0, 0)
    if not first[1] then
      far_head = false
      break
    end
    local b = tonumber(first[1])
    if promote_at(b) > now then
      far_head = b
      break
    end
    local key = far_key(b)
    local room = PROMOTE_MAX - moved
    local flat
    local whole = redis.call('HLEN', key) <= room
    if whole then
      flat = redis.call('HGETALL', key)
    else
      flat = redis.call('HRANDFIELD', key, room, 'WITHVALUES')
    end
    local ids, scores, envelopes = {}, {}, {}
    for i = 1, #flat, 2 do
      local id, raw = flat[i], flat[i + 1]
      local m = far_decode(raw, b)
      ids[#ids + 1] = id
      envelopes[#envelopes + 1] = id
      if m then
        scores[#scores + 1] = m.due_ms
        envelopes[#envelopes + 1] = encode(m)
      else
        scores[#scores + 1] = now
        envelopes[#envelopes + 1] = raw
      end
      scores[#scores + 1] = id
    end
    if #ids > 0 then
      redis.call('ZADD', KEYS[1], unpack(scores))
      redis.call('HSET', KEYS[3], unpack(envelopes))
      redis.call('HDEL', KEYS[8], unpack(ids))
    end
    if whole then
      redis.call('DEL', key)
      redis.call('ZREM', KEYS[7], first[1])
    elseif #ids > 0 then
      redis.call('HDEL', key, unpack(ids))
    end
    far_count(-#ids)
    moved = moved + #ids
  end
  return moved
end
