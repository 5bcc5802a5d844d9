-- far_place.lua: storing, removing and promoting far messages, shared by the delay queue's
-- scripts (the parts a script uses prepended after far.lua, whose buckets, declared keys and
-- lookups it uses).

-- A far record: a fresh message (never claimed, no error, no option, no trace, no dedup window,
-- the default priority) as
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
      and m.dead_reason == '' and m.trace == '' and (m.dedup or 0) == 0
      and (m.priority or DEFAULT_PRIORITY) == DEFAULT_PRIORITY and (m.key or '') == ''
      and m.due_ms >= m.enqueued_ms then
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
    last_error = '', dead_reason = '', trace = '', payload = string.sub(raw, body), dedup = 0, key = '',
    priority = DEFAULT_PRIORITY,
  }
end

-- Stores envelope `m` of `id` (ULID time `t`, or nil) where its due time puts it: its far
-- bucket while that bucket's promotion is still ahead, else the hot keys. Returns when the
-- boss must look because of it (the due time, or the bucket's promotion) and the far bucket
-- it went to (nil for the hot keys). (Then far_flush().)
local function place(id, m, now, t)
  local b = bucket_of(m.due_ms)
  if promote_at(b) <= now then
    to_delayed(id, m, m.due_ms)
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
-- (promote() leaves in far_head the first far bucket it left, false for none, so that
-- claim_due need not read it again; and in far_head_due the lower bound of the earliest due
-- time in that bucket, its score in `far`.)
local far_head, far_head_due = nil, nil
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
  local first
  while true do
    first = redis.call('ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')
    if not first[1] then
      far_head = false
      break
    end
    local b = tonumber(first[1])
    far_head, far_head_due = b, tonumber(first[2])
    if moved >= PROMOTE_MAX or promote_at(b) > now or not is_declared(b) then break end
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
        index_priority(id, m.priority or DEFAULT_PRIORITY)
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

-- After promote(now): the earliest time (a lower bound) at which a far message not promoted
-- yet is due, when that is not after `now`; else nil. Such messages are left when claims
-- stopped for longer than a bucket's width (a pause, an outage, every slot busy) or a bucket
-- was too large for one call (promoted in random portions): a claim must not take a due
-- message that one of them would come before. Only a bucket whose promotion time has come
-- counts (every due one's has: its earliest message is due after its start); one whose has
-- not (a width edited by hand) is never promoted, and must not hold claims up for good.
-- A bucket the client cannot declare (a negative or fractional member, by hand) is never
-- promoted either, and does not count.
local function declarable(b)
  return b and b == b and b >= 0 and b % 1 == 0
end
local function far_overdue(now)
  if declarable(far_head) and far_head_due and far_head_due <= now
      and promote_at(far_head) <= now then
    return far_head_due
  end
  return nil
end

-- Far buckets one call may declare for promotion at most (see due_buckets).
local FAR_DECLARE_MAX = 100
-- The far buckets whose promotion time has come, the first FAR_DECLARE_MAX of them, as the
-- members separated by spaces: behind on promotion (far_overdue), the client declares them
-- all on its next call, so that a long outage's buckets (a minute each) are promoted a
-- hundred a call, not one.
local function due_buckets(now)
  local run = {}
  for _, m in ipairs(redis.call('ZRANGE', KEYS[7], 0, FAR_DECLARE_MAX - 1)) do
    local b = tonumber(m)
    if not declarable(b) or promote_at(b) > now then break end
    run[#run + 1] = m
  end
  return table.concat(run, ' ')
end
