-- claim_due.lua: far buckets whose time has come are promoted into `delayed` (a part of one,
-- when large), then due messages move from `delayed` to `inflight` with an ack deadline.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] max count   ARGV[4] lease ms (deadline = now + lease)
-- ARGV[5] the topic's rate limit, `<interval µs> <burst>`, or '' for none: claims keep to it
--   across every process (a generic cell rate algorithm: `rate_tat` in KEYS[9] is the time,
--   µs, by which every claim so far would have been spaced out at the full rate; a claim may
--   take as many as fit `burst` intervals ahead of now). A message held back stays due and
--   unclaimed, its attempt unused, and `when to look next` is when the limit lets one more go.
-- ARGV[6] the topic's rate limit per message key (`rate_per_key`), `<interval µs> <burst>`,
--   or '' for none: each key's claims keep to it, a key's times kept in KEYS[13] `keyrate`
--   (µs, as `rate_tat`; a time that has passed is removed): `r<key>`, up to which starts are
--   promised, and `s<key>`, the limit on its actual starts. A due message whose key is held
--   back is not left at the head, where it would hold up the other keys: it is promised the
--   next free start of its key and waits in `delayed` until then, scored half a millisecond
--   before it (the mark of a message moved aside). Claimed about when promised, it starts;
--   claimed long after (a pause in claims), it starts only if the key's actual starts allow,
--   else it is promised the key's next free start (after a pause, a key's overdue messages
--   are spread out again, each moved once, and at most one extra start slips in). So each
--   message of a hot key is moved about once, and the other keys' due messages are claimed
--   at once. The set expires once its latest time has passed.
-- ARGV[7] dead_max   ARGV[8] dead_ttl ms: the dead-letter bounds, for a claimed message that
--   is not an envelope (moved to the dead letters here; see trim_dead)
-- ARGV[9] n, then the acks that ride on this claim, as ack.lua's from its ARGV[3] (see
--   `ack_receipts` in prelude.lua; n is 0 or absent for none): done last, paused or not, so
--   that a claim that fails (Redis does not undo what a script wrote before an error) fails
--   before them, and they are sent again.
-- KEYS[19], when given: the far bucket the boss expects to promote next (see far.lua)
-- A topic that has had a message with a priority claims through `ready` (see "Priorities" in
-- prelude.lua): due messages move there from `delayed`, at most READY_MOVE_MAX a call, and
-- claims take its head, the highest priority first and, within one, the earliest due.
-- Returns { now_us, when to look next (ms), -1 (nothing delayed) or -2 (paused), the first far
-- bucket or -1 (behind on promotion: the buckets due for it, a string, see due_buckets), 1
-- when due messages wait on the rate limit (else 0), the claim's token (0 when it claimed
-- nothing), the acks' answers (a string, a character each: '1' acked, '0' stale),
-- { id1, id2, ... }, { envelope1, envelope2, ... } (these two only when it claimed), and the
-- dead letters dropped past the bounds (only when a claimed message was not an envelope) }.
-- Now is in microseconds, so a boss can sleep to the due time precisely; the boss declares
-- that bucket on its next call, so that it can be promoted. Each envelope is as stored: its
-- delivery's attempt is one more, and its token the claim's (see `token_field` in
-- prelude.lua). An id whose envelope is missing has 'orphan' in its envelope's place
-- (dropped); one that is not an envelope has 'corrupt' (moved to the dead letters untouched).
-- Publishes WAKE_BACK (a claim into an empty `inflight`) and WAKE_CLAIMED (it took all that
-- was due) on the topic's wake channel.
local now_micros = now_us()
-- The acks riding on this claim, as the answer's string.
local function ride()
  return ack_receipts(9, math.floor(now_micros / 1000))
end
-- A paused topic: nothing is claimed (nothing promoted either), and `when to look next` is -2.
if redis.call('EXISTS', KEYS[10]) == 1 then return { now_micros, -2, -1, 0, 0, ride() } end
local now = math.floor(now_micros / 1000)
promote(now)
-- Far messages that may be due and were not promoted yet (see far_overdue): without
-- priorities a claim takes only messages due before the earliest of them (FIFO by due time);
-- with priorities it takes none (one of them may be higher), and the boss calls again at once
-- (next_due() is then not after now) until they are promoted, which ends: no message joins a
-- bucket whose promotion time has passed.
local far_due = far_overdue(now)
local upto = far_due and '(' .. string.format('%d', far_due) or now
local limit = tonumber(ARGV[3])
local interval, burst = string.match(ARGV[5] or '', '^(%S+) (%d+)$')
local tat, credit = nil, 0
local prio
if interval then
  interval, burst = tonumber(interval), tonumber(burst)
  local state = redis.call('HMGET', KEYS[9], 'rate_tat', 'rate_credit', 'prio')
  prio = state[3]
  tat = tonumber(state[1]) or 0
  -- Time the test kit's travel passed (µs, travel.lua): claims it would have let start.
  credit = tonumber(state[2]) or 0
  if credit ~= credit or credit < 0 then credit = 0 end
  -- Claims under this rate never put `rate_tat` past now + burst intervals; a later one was
  -- left by a slower rate (a changed configuration), a clock stepped back or a hand edit, and
  -- would stall the topic: it is brought back to that bound and kept there (written, so that
  -- the next claims count from it). Not a number (nan, garbage): as if unset.
  if tat ~= tat then tat = 0 end
  tat = math.max(tat, now_micros)
  if tat > now_micros + burst * interval then
    tat = now_micros + burst * interval
    redis.call('HSET', KEYS[9], 'rate_tat', string.format('%d', math.ceil(tat)))
  end
  limit = math.min(limit, math.floor((now_micros - tat + credit) / interval + burst))
else
  prio = redis.call('HGET', KEYS[9], 'prio')
end
-- With priorities, the due messages first move to `ready` by priority, READY_MOVE_MAX a call,
-- their priorities read from the index (KEYS[14], see prelude.lua). While due messages are
-- left in `delayed`, a higher one may be among them: nothing is claimed, and the boss calls
-- again at once.
local READY_MOVE_MAX = 1000
local behind = false
if prio then
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0,
    READY_MOVE_MAX)
  if #due > 0 then
    local moving = {}
    for i = 1, #due, 2 do moving[#moving + 1] = due[i] end
    local levels = redis.call('HMGET', KEYS[14], unpack(moving))
    local scores, indexed = {}, {}
    for i, id in ipairs(moving) do
      local p = tonumber(levels[i])
      if p then indexed[#indexed + 1] = id end
      if not p or p < 0 or p > 255 then p = DEFAULT_PRIORITY end
      scores[#scores + 1] = ready_score(p, tonumber(due[2 * i]))
      scores[#scores + 1] = id
    end
    -- The new home first (see far.lua): ZRANGEBYSCORE from -inf returned ranks 0 .. n-1.
    redis.call('ZADD', KEYS[12], unpack(scores))
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #moving - 1)
    if #indexed > 0 then redis.call('HDEL', KEYS[14], unpack(indexed)) end
    behind = #moving == READY_MOVE_MAX
      and #redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1) > 0
  end
end
if behind or (prio and far_due) then limit = 0 end
-- rate_per_key: picks up to `limit` due messages whose keys allow a start, and moves those
-- of held-back keys to the starts their keys will allow (see ARGV[6]); at most KEY_SCAN_MAX
-- looked at a call (the boss calls again while due messages are left). Removes what it picks
-- from where it was.
local KEY_SCAN_MAX = 1000
local function pick_per_key(limit, kinterval, kburst)
  local cand
  if prio then
    cand = redis.call('ZRANGE', KEYS[12], 0, KEY_SCAN_MAX - 1, 'WITHSCORES')
  else
    cand = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', upto, 'WITHSCORES', 'LIMIT', 0,
      KEY_SCAN_MAX)
  end
  if #cand == 0 then
    prune_key_times(now_micros)
    return {}, nil
  end
  local ids = {}
  for i = 1, #cand, 2 do ids[#ids + 1] = cand[i] end
  local raws = redis.call('HMGET', KEYS[3], unpack(ids))
  -- Two times per key (members 'r' .. key and 's' .. key of KEYS[13]): `res`, up to which
  -- starts are promised to messages moved aside, and `start`, the limit on actual starts.
  local key, res, start, uniq = {}, {}, {}, {}
  for i = 1, #ids do
    key[i] = key_of(raws[i])
    if not res[key[i]] then
      res[key[i]] = 0
      uniq[#uniq + 1] = 'r' .. key[i]
      uniq[#uniq + 1] = 's' .. key[i]
    end
  end
  -- After the test kit's travel, what it made due starts without waiting (see travel.lua).
  local credit = redis.call('HGET', KEYS[9], 'key_credit')
  local stored = redis.call('ZMSCORE', KEYS[13], unpack(uniq))
  for i = 1, #uniq, 2 do
    local k = string.sub(uniq[i], 2)
    res[k] = tonumber(stored[i]) or 0
    start[k] = tonumber(stored[i + 1]) or 0
  end
  local ahead = (kburst - 1) * kinterval
  -- How late a promised start may be claimed and still count as on time.
  local late_ok = math.max(kburst * kinterval, 20000)
  local picked, parked, looked, changed = {}, {}, {}, {}
  -- Moves `id` aside to the start `at` (µs) allows, scored half a ms before it (marked).
  local function set_aside(id, at, score)
    parked[#parked + 1] = string.format('%d.5', math.ceil((at - ahead) / 1000) - 1)
    parked[#parked + 1] = id
    -- Out of `ready`, its priority goes back in the index (see prelude.lua).
    if prio then
      local p = ready_priority(score)
      if p ~= DEFAULT_PRIORITY then redis.call('HSET', KEYS[14], id, p) end
    end
  end
  for i, id in ipairs(ids) do
    if #picked >= limit then break end
    local k = key[i]
    looked[#looked + 1] = id
    changed[k] = true
    local score = tonumber(cand[2 * i])
    local due = prio and ready_due(score) or score
    if credit then
      picked[#picked + 1] = id
    elseif due % 1 ~= 0 and (due + 0.5) * 1000 >= now_micros - late_ok then
      -- Moved aside before and claimed about when promised: it starts.
      picked[#picked + 1] = id
      start[k] = math.max(start[k], now_micros) + kinterval
    elseif due % 1 ~= 0 and start[k] <= now_micros + ahead then
      -- Promised long ago (a pause in claims, or every slot busy): it starts if the key's
      -- actual starts allow (one of the key's overdue messages per interval)...
      picked[#picked + 1] = id
      start[k] = math.max(start[k], now_micros) + kinterval
    elseif due % 1 == 0 and res[k] <= now_micros + ahead and start[k] <= now_micros + ahead then
      picked[#picked + 1] = id
      res[k] = math.max(res[k], now_micros) + kinterval
      start[k] = math.max(start[k], now_micros) + kinterval
    else
      -- ... else (and a held-back new one) it is promised the key's next free start.
      local at = math.max(res[k], start[k])
      set_aside(id, at, score)
      res[k] = at + kinterval
    end
  end
  -- The new homes first (see far.lua), then the old ones cleared.
  if #parked > 0 then redis.call('ZADD', KEYS[1], unpack(parked)) end
  local times = {}
  for k in pairs(changed) do
    for _, t in ipairs({ { 'r', res[k] }, { 's', start[k] } }) do
      if t[2] > now_micros then
        times[#times + 1] = string.format('%d', math.ceil(t[2]))
        times[#times + 1] = t[1] .. k
      end
    end
  end
  if #times > 0 then
    redis.call('ZADD', KEYS[13], unpack(times))
    -- The whole set goes once its latest time has passed: a topic gone quiet keeps no key.
    local last = redis.call('ZRANGE', KEYS[13], -1, -1, 'WITHSCORES')
    if last[2] then
      redis.call('PEXPIREAT', KEYS[13], math.ceil(tonumber(last[2]) / 1000) + 1)
    end
  end
  if prio then
    redis.call('ZREM', KEYS[12], unpack(looked))
  elseif #picked > 0 then
    redis.call('ZREM', KEYS[1], unpack(picked))
  end
  prune_key_times(now_micros)
  return picked, credit
end

local kinterval, kburst = string.match(ARGV[6] or '', '^(%S+) (%d+)$')
local function key_credit_spent()
  -- Nothing the travel made due is left: its credit is spent.
  local left = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1)
  if #left == 0 and redis.call('EXISTS', KEYS[12]) == 0 then
    redis.call('HDEL', KEYS[9], 'key_credit')
  end
end
local ids = {}
if limit > 0 then
  if kinterval then
    local credit
    ids, credit = pick_per_key(limit, tonumber(kinterval), tonumber(kburst))
    if credit then key_credit_spent() end
  elseif prio then
    ids = redis.call('ZRANGE', KEYS[12], 0, limit - 1)
  else
    ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', upto, 'LIMIT', 0, limit)
  end
end
if interval and #ids > 0 then
  local used = #ids * interval
  if credit > 0 then
    local spent = math.min(credit, used)
    credit, used = credit - spent, used - spent
    if credit > 0 then
      redis.call('HSET', KEYS[9], 'rate_credit', string.format('%d', math.floor(credit)))
    else
      redis.call('HDEL', KEYS[9], 'rate_credit')
    end
  end
  tat = tat + used
  redis.call('HSET', KEYS[9], 'rate_tat', string.format('%d', math.ceil(tat)))
end
local out = { now_micros, -1, -1, 0, 0, '' }
if #ids > 0 then
  local inflight_was_empty = inflight_count() == 0
  -- Numbers go to Redis as strings made once (Redis would format each with %.17g).
  local deadline = string.format('%d', now + tonumber(ARGV[4]))
  -- ZRANGEBYSCORE from -inf (or ZRANGE from 0) returned ranks 0 .. #ids-1: remove exactly
  -- those in one call (pick_per_key removed its own).
  if not kinterval then
    redis.call('ZREMRANGEBYRANK', prio and KEYS[12] or KEYS[1], 0, #ids - 1)
  end
  local raws = redis.call('HMGET', KEYS[3], unpack(ids))
  -- One token for the call, from the topic's counter: a fence token need only differ between
  -- two claims of one id, and be unique in the topic for all time (see `token_field`).
  local token = string.format('%d', redis.call('INCRBY', KEYS[5], 1))
  out[5] = token
  -- Counted, not `#t` (a binary search in Lua 5.1): this loop runs for every message. The
  -- ids and envelopes go back as the tables Redis gave (an element-at-a-time copy would be
  -- rehashed at every power of two), a missing or unreadable envelope marked in its place.
  -- One table for the in-flight scores, then (rewritten in place, already grown) the tokens.
  local args, corrupt, ns = {}, {}, 0
  local byte = string.byte
  for i = 1, #ids do
    local id, raw = ids[i], raws[i]
    -- The envelope goes out as it is: the client reads it (and counts this attempt); one that
    -- is not an envelope of this layout at all goes to the dead letters untouched here, one
    -- the client cannot read goes there through `bury.lua`.
    -- ('1 ' by its bytes, 49 and 32: a substring would be a new Lua string a message.)
    local b1, b2
    if raw then b1, b2 = byte(raw, 1, 2) end
    if b1 == 49 and b2 == 32 then
      args[ns + 1] = deadline
      args[ns + 2] = id
      ns = ns + 2
    elseif raw then
      corrupt[#corrupt + 1] = now
      corrupt[#corrupt + 1] = id
      raws[i] = 'corrupt'
    else
      raws[i] = 'orphan'
    end
  end
  out[7] = ids
  out[8] = raws
  if ns > 0 then
    -- Into an empty set, with SKIPLIST (see prelude.lua).
    if inflight_was_empty then
      args[ns + 1] = '+inf'
      args[ns + 2] = SKIPLIST
      redis.call('ZADD', KEYS[2], unpack(args, 1, ns + 2))
    else
      redis.call('ZADD', KEYS[2], unpack(args, 1, ns))
    end
    for j = 1, ns, 2 do
      args[j] = args[j + 1] .. '\n' -- token_field(id), inlined
      args[j + 1] = token
    end
    redis.call('HSET', KEYS[3], unpack(args, 1, ns))
  end
  if #corrupt > 0 then
    redis.call('ZADD', KEYS[4], unpack(corrupt))
    count('dead', #corrupt / 2, now)
    out[9] = trim_dead(now, ARGV[7], ARGV[8])
  end
  -- With the deadline: other processes' back pools need look only then.
  if inflight_was_empty and ns > 0 then
    wake(WAKE_BACK .. deadline)
  end
end
far_flush()
local next, head = next_due()
-- A message `rate_per_key` moved is scored half a ms before its start: look at the start.
if next ~= -1 then next = math.ceil(next) end
-- Due messages wait in `ready`: look again now (or when the rate limit lets one go).
if prio and redis.call('EXISTS', KEYS[12]) == 1 then next = now end
-- The test kit's credit is for what its travel made due: once nothing is due, it is spent.
if credit > 0 and (next == -1 or next > now) then
  redis.call('HDEL', KEYS[9], 'rate_credit')
  credit = 0
end
-- Behind on promotion (see far_due): look again at once, declaring the buckets due for it.
if far_due then next = now end
-- Held back by the rate limit: look again when it lets the next one go.
if interval and next ~= -1 and next <= now and not far_due then
  next = math.max(next, math.ceil((tat - credit - burst * interval + interval) / 1000))
  out[4] = 1
end
out[2] = next
out[3] = far_due and due_buckets(now) or head or -1
-- Took messages and nothing more is due: the other processes' bosses, asleep to the same due
-- time, learn when to look next instead of claiming for nothing.
if #ids > 0 and (next == -1 or next > now) then
  wake(WAKE_CLAIMED .. string.format('%d:%d', next, now_micros))
end
out[6] = ride()
return out
