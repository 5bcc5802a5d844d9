-- far.lua: the far buckets, shared by the delay queue's scripts (prepended after prelude.lua).
--
-- The hot keys (`delayed`, `msg`) hold only messages due within about two minutes; one due
-- later waits in the far bucket of its due time, b = floor(due / width), the HASH
-- KEYS[7] .. ':' .. b (id -> far record), until the bucket is promoted: a whole bucket before
-- it starts, its messages move into the hot keys (`promote`, run by claim_due). So the hot
-- keys stay small however many messages wait for days, and a far message costs one hash
-- entry. KEYS[7] `far` is a ZSET of the buckets not promoted yet (member b, score a lower
-- bound of the earliest due time in it); KEYS[9] `farinfo` a HASH with `count` (messages in
-- far buckets) and `width` (the bucket width in ms, fixed when the topic's first far message
-- is stored). A message is found by id without an index when the id is generated: a ULID of
-- its due time, whose bucket is its time's. KEYS[8] `where` (id -> bucket) lists the others
-- (user ids, and a generated id whose time falls in another bucket than its due time).
--
-- Declared buckets. A script touches only keys it was given: the far bucket keys a call may
-- touch follow the topic's nine keys (KEYS[10] on). On Redis Cluster a key a script uses
-- without declaring it fails the script partway while its slot migrates, with the writes
-- before it kept; a declared one makes Redis answer TRYAGAIN (or ASK) before the script
-- starts. So a script first works out, reading declared keys only, which buckets it needs
-- (`need`), and when one is missing returns `DELAYQ_NEED <width> <b> ...` before it writes
-- anything; the client calls again declaring them (scripts.rs, `declaring`). For the same
-- reason a script never writes a key after it may have emptied it (Redis deletes an empty
-- hash or sorted set, and a key that is missing mid-script is "not local" while its slot
-- migrates): scripts place a message in its new home first and clear the old one after.
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

-- Whether a message due at `due` goes to a far bucket now.
local function goes_far(due, now)
  return promote_at(bucket_of(due)) > now
end

-- Bucket keys and member names, made once per bucket and call.
local far_keys, far_members = {}, {}
local function bucket_name(b)
  local key = far_keys[b]
  if not key then
    far_members[b] = string.format('%d', b)
    key = KEYS[7] .. ':' .. far_members[b]
    far_keys[b] = key
  end
  return key
end
local function far_member(b)
  bucket_name(b)
  return far_members[b]
end

local declared = nil
local function is_declared(b)
  if not declared then
    declared = {}
    for i = 10, #KEYS do declared[KEYS[i]] = true end
  end
  return declared[bucket_name(b)] == true
end

-- The key of bucket b, which the call must have declared (a script that reaches here with an
-- undeclared bucket has a bug in its `need` step; it stops rather than touch the key).
local function far_key(b)
  if not is_declared(b) then
    error('delayq: far bucket ' .. bucket_name(b) .. ' used without being declared')
  end
  return far_keys[b]
end

-- The buckets this call needs and was not given.
local wanted, wanted_set = {}, {}
local function need(b)
  if b and not wanted_set[b] and not is_declared(b) then
    wanted_set[b] = true
    wanted[#wanted + 1] = far_member(b)
  end
end

-- The reply that asks the client to call again declaring the buckets `need` found missing,
-- or nil when it has them all. A script returns it before its first write.
local function missing_buckets()
  if #wanted == 0 then return nil end
  return redis.error_reply('DELAYQ_NEED ' .. width() .. ' ' .. table.concat(wanted, ' '))
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
local function far_exists()
  if any_far == nil then
    any_far = redis.call('EXISTS', KEYS[7]) == 1 or far_delta ~= 0
  end
  return any_far
end
local function where_exists()
  if any_where == nil then any_where = redis.call('EXISTS', KEYS[8]) == 1 end
  return any_where
end

-- The `need` step of far_bucket(id, t): the buckets it may look in. `soon_far` tells that
-- this call places messages far before it looks (a batch), so `far` may exist by then.
local function need_lookup(id, t, soon_far)
  if not (soon_far or far_exists()) then return end
  if t then need(bucket_of(t)) end
  if where_exists() then need(tonumber(redis.call('HGET', KEYS[8], id))) end
end

-- The far bucket that holds `id` (whose ULID time is `t`, nil for another id), or nil.
local function far_bucket(id, t)
  if not far_exists() then return nil end
  if t then
    local b = bucket_of(t)
    if redis.call('HEXISTS', far_key(b), id) == 1 then return b end
  end
  if not where_exists() then return nil end
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
-- boss must look because of it (the due time, or the bucket's promotion) and the far bucket
-- it went to (nil for the hot keys). (Then far_flush().)
local function place(id, m, now, t)
  local b = bucket_of(m.due_ms)
  if promote_at(b) <= now then
    redis.call('HSET', KEYS[3], id, encode(m))
    redis.call('ZADD', KEYS[1], m.due_ms, id)
    return m.due_ms, nil
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
  return promote_at(b), b
end

-- Removes `id` from far bucket b, where it was before place() put it in bucket `now_in`
-- (nil: the hot keys, or nowhere). (Then far_flush().)
local function far_remove(id, b, t, now_in)
  if now_in == b then
    far_count(-1) -- place() overwrote the record and counted it again
    return
  end
  local key = far_key(b)
  redis.call('HDEL', key, id)
  -- `where` holds the new bucket when place() wrote it (a new bucket other than t's).
  if not now_in or (t and bucket_of(t) == now_in) then redis.call('HDEL', KEYS[8], id) end
  if redis.call('EXISTS', key) == 0 then
    redis.call('ZREM', KEYS[7], far_member(b))
    far_heads[b] = nil
  end
  far_count(-1)
end

-- When the boss must look next: the head of `delayed` or the promotion of the first far
-- bucket, whichever is earlier; -1 when there is neither. Also the first far bucket (false
-- for none), which the boss declares on its next claim.
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
  return due, b
end

-- Moves the messages of far buckets whose promotion time has come into the hot keys, at most
-- PROMOTE_MAX a call (the boss calls again while one is due). It stops at a bucket the call
-- did not declare, leaving it in far_head, so that next_due() says "now" and names it. A far
-- record that does not parse goes to the hot keys as it is, due now, so that the claim
-- dead-letters it.
local function promote(now)
  local moved = 0
  while moved < PROMOTE_MAX do
    local first = redis.call('ZRANGE', KEYS[7], 0, 0)
    if not first[1] then
      far_head = false
      break
    end
    local b = tonumber(first[1])
    if promote_at(b) > now or not is_declared(b) then
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
