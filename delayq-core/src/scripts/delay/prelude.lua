-- prelude.lua: shared by every delayq script (the parts a script uses are prepended when it is
-- loaded: `Prelude` in script.rs).
--
-- Every script of a topic takes the same keys, in this order:
--   KEYS[1] delayed   KEYS[2] inflight   KEYS[3] msg   KEYS[4] dead   KEYS[5] seq
--   KEYS[6] stats (outcome counters, see `count` below)
--   KEYS[7] far   KEYS[8] where
--   KEYS[9] farinfo, the topic's running state: `count` and `width` (far buckets, see "Far
--   buckets" below), `rate_tat` (the rate limit's, see claim_due.lua), `dead_dropped` (dead
--   letters dropped past the bounds, in all, see trim_dead) and `rate` (the limit announced)
--   KEYS[10] paused (present while the topic is paused: claim_due claims nothing)
--   KEYS[11] done (id -> until when, ms, the id stays reserved after its message finished:
--   the messages sent with `dedup_for`, see `reserve`)
--   KEYS[12] ready (for a topic that has had a message with a priority: its due messages,
--   by priority then due time, see "Priorities" below)
--   KEYS[13] keyrate (for a topic with `rate_per_key`: message key -> the key's limit time,
--   µs, see claim_due.lua)
--   KEYS[14] priority (id -> priority of each message in `delayed` whose priority is not the
--   default, see "Priorities" below)
--   KEYS[15] waits, KEYS[16] results, KEYS[17] results by end (see "Ends" below)
--   KEYS[18] steps (id -> when it ended, ms: the flow steps that ended and are not settled in
--   their flow yet, see `step_ended` below and workflow/ in delayq-core)
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
-- and, for a message sent with `dedup_for`, a tenth, its window (ms; the ninth is then there,
-- 0 without a trace), and for one sent with a priority other than the default (128), an
-- eleventh, its priority (0-255; the ninth and tenth are then there, 0 when unused), and for
-- one sent with a key (`SendOptions::key`), a twelfth, the key's length, with the key between
-- the trace and the payload:
--   "1 ... <reason_len> <trace_len> <dedup_ms> <priority> <key_len>\n" .. last_error
--   .. dead_reason .. trace .. key .. payload
-- attempt:  handler runs that counted (a clean shutdown hands one back)
-- token:    the fence token of the current (last) claim, drawn from the topic's `seq` counter,
--           so it is unique in the topic for all time, even when an id is sent again after an
--           ack; a delivery must present it to ack/nack/extend/release. 0 = never claimed.
-- max_attempts: 0 means "the listener's default"
-- Times are milliseconds on the Redis server's clock.
--
-- Line numbers: only the parts of this prelude, far.lua and far_place.lua that a script uses
-- are prepended to it (`Prelude` in script.rs: a part begins at an unindented `local`),
-- so a Lua error reports a line of the script as loaded, not of its file.

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function now_ms()
  return math.floor(now_us() / 1000)
end

-- Priorities: 0-255, higher first; what a message without one has (send_options.rs'
-- Priority::Normal).
local DEFAULT_PRIORITY = 128

local function decode(raw)
  if type(raw) ~= 'string' then return nil end
  local nl = string.find(raw, '\n', 1, true)
  if not nl then return nil end
  local v, a, d, m, e, due, el, rl, tl, dd, pr, kl = string.match(string.sub(raw, 1, nl - 1),
    '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) ?(%d*) ?(%d*) ?(%d*) ?(%d*)$')
  if v ~= '1' then return nil end
  el = tonumber(el)
  rl = tonumber(rl)
  tl = tonumber(tl) or 0
  kl = tonumber(kl) or 0
  if nl + el + rl + tl + kl > #raw then return nil end
  local priority = tonumber(pr) or DEFAULT_PRIORITY
  if priority > 255 then priority = DEFAULT_PRIORITY end
  return {
    attempt = tonumber(a), token = tonumber(d), max_attempts = tonumber(m),
    enqueued_ms = tonumber(e), due_ms = tonumber(due),
    last_error = string.sub(raw, nl + 1, nl + el),
    dead_reason = string.sub(raw, nl + el + 1, nl + el + rl),
    trace = string.sub(raw, nl + el + rl + 1, nl + el + rl + tl),
    key = string.sub(raw, nl + el + rl + tl + 1, nl + el + rl + tl + kl),
    payload = string.sub(raw, nl + el + rl + tl + kl + 1),
    dedup = tonumber(dd) or 0,
    priority = priority,
  }
end

-- An integer as the header writes it: `string.format` costs about 1,000 instructions a number,
-- and most header fields are 0. The last two others are kept, the last used first: a send
-- writes its call's time and each message's due time twice (header, score).
local int_n1, int_s1, int_n2, int_s2 = nil, nil, nil, nil
local function int(n)
  if n == 0 then return '0' end
  if n == int_n1 then return int_s1 end
  if n == int_n2 then
    int_n1, int_s1, int_n2, int_s2 = int_n2, int_s2, int_n1, int_s1
    return int_s1
  end
  local s = string.format('%d', n)
  int_n1, int_s1, int_n2, int_s2 = n, s, int_n1, int_s1
  return s
end

-- An envelope in three parts, so that a send builds the parts its messages share once a call
-- (`envelope_head .. due .. envelope_tail .. payload`, as `encode`): the header up to its due
-- time, and from after the due time to the payload.
local function envelope_head(m)
  return '1 ' .. int(m.attempt) .. ' ' .. int(m.token) .. ' ' .. int(m.max_attempts) .. ' '
    .. int(m.enqueued_ms) .. ' '
end

local function envelope_tail(m)
  local header = ' ' .. int(#m.last_error) .. ' ' .. int(#m.dead_reason)
  local priority = m.priority or DEFAULT_PRIORITY
  local key = m.key or ''
  if #key > 0 then
    header = header .. string.format(' %d %d %d %d', #m.trace, m.dedup or 0, priority, #key)
  elseif priority ~= DEFAULT_PRIORITY then
    header = header .. string.format(' %d %d %d', #m.trace, m.dedup or 0, priority)
  elseif (m.dedup or 0) > 0 then
    header = header .. string.format(' %d %d', #m.trace, m.dedup)
  elseif #m.trace > 0 then
    header = header .. ' ' .. #m.trace
  end
  return header .. '\n' .. m.last_error .. m.dead_reason .. m.trace .. key
end

local function encode(m)
  return envelope_head(m) .. int(m.due_ms) .. envelope_tail(m) .. m.payload
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

-- The envelope as the delivery of a claim sees it: attempt one higher and the claim's token,
-- rewriting only the header; nil when the header does not parse (for reads: a claim itself
-- leaves the envelope as it is, see `token_field`).
local function bump(raw, token)
  if type(raw) ~= 'string' then return nil end
  local a, rest, body = string.match(raw, '^1 (%d+) %d+ ([%d ]+\n)()')
  if not a then return nil end
  return string.format('1 %d %d ', a + 1, token) .. rest .. string.sub(raw, body)
end

-- The in-flight set keeps one member more than its claims, once a claim was made into it:
-- SKIPLIST, scored +inf, and named longer than 64 bytes, so that Redis holds the set as a
-- skiplist for good (up to 128 short members it would be a listpack, where each claim and ack
-- scans the whole set: some 20,000 instructions a message), and the set does not empty
-- between claims. Its name holds a newline: no message id is like it. So claims are counted
-- below +inf (`inflight_count`), and no deadline is +inf.
local SKIPLIST = '\nkeeps the in-flight set a skiplist; no message id has a newline (prelude.lua)'
local function inflight_count()
  return redis.call('ZCOUNT', KEYS[2], '-inf', '(+inf')
end
-- The earliest claim deadline, or -1 when nothing is in flight.
local function next_deadline()
  local head = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if head[2] then return tonumber(head[2]) end
  return -1
end

-- A claim's token. A claim leaves the envelope as it is (its attempt counts when the claim
-- ends, see `claim_ended`) and keeps its fence token beside it, in `msg` under the id followed
-- by a newline (`token_field`; an id has no control character, so no id is such a field). The
-- field is there exactly while the id is in flight under a claim of this layout; every script
-- that ends a claim deletes it. A claim made by an earlier build (before this field) rewrote
-- the envelope instead, attempt counted and token in the header: the scripts still read those.
local function token_field(id)
  return id .. '\n'
end

-- The raw envelope of `id` when the delivery holding `token` still owns it (it is in flight
-- and no later claim happened), else nil; and whether its claim keeps its token beside the
-- envelope (so its attempt is not counted yet). Reads only the header.
local function owned_raw(id, token)
  if not redis.call('ZSCORE', KEYS[2], id) then return nil end
  local got = redis.call('HMGET', KEYS[3], id, token_field(id))
  local raw, held = got[1], got[2]
  if held then
    if held == tostring(token) and type(raw) == 'string' then return raw, true end
    return nil
  end
  if token_of(raw) == tonumber(token) then return raw, false end
  return nil
end

-- The envelope `m` of a claim that kept `token` beside it, as a claim of an earlier build left
-- it: this claim's attempt counted and its token in the header (the last claim's token tells
-- a message handed back from one never claimed).
local function as_claimed(m, token)
  m.attempt = m.attempt + 1
  m.token = tonumber(token)
end

-- The same, decoded, for scripts that rewrite the envelope, as its claim left it (see
-- `as_claimed`). A script that ends the claim calls `claim_ended`.
local function owned(id, token)
  local raw, beside = owned_raw(id, token)
  if not raw then return nil end
  local m = decode(raw)
  if m and beside then as_claimed(m, token) end
  return m
end

-- A claim of `id` ends (it leaves `inflight`): its token goes from beside the envelope.
local function claim_ended(id)
  redis.call('HDEL', KEYS[3], token_field(id))
end

-- What a wake-up tells the runtime (its Rust twins are in scripts.rs).
local WAKE_BOSS = 'd' -- the head of `delayed` moved earlier: the boss looks again
-- A claim landed in an empty `inflight` (`i<its ack deadline, ms>`, from claim_due), or
-- claims' deadlines moved (`i` alone: the back pool looks now).
local WAKE_BACK = 'i'
-- A claim took what was due (`c<when to look next, ms, or -1>:<the claim's time, µs>`, from
-- claim_due): a boss
-- that slept to the same due time sleeps to the new one instead of claiming for nothing.
local WAKE_CLAIMED = 'c'
-- The test kit's time travel moved due times and the rate limit's time: every boss looks now,
-- a boss waiting on the rate limit included (travel.lua).
local WAKE_TRAVEL = 't'

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

-- Reservations (`dedup_for`): a finished message (acked or dead) whose envelope carries a
-- window keeps its id reserved in KEYS[11] until now + window; send.lua answers a send with
-- a reserved id as a duplicate ('d'). `pairs` is a flat list of window (ms), id. Reservations
-- whose time passed are removed on the way (and by the back pool's sweep,
-- `unreserve_expired`), at most UNRESERVE_PER_CALL a call (windows that all ended together go
-- over a few calls), so a quiet id costs nothing once its window is over. A reservation ends
-- by the year 9999 (MAX_DUE_MS, as time.rs') at the latest.
local UNRESERVE_PER_CALL = 1000
local MAX_DUE_MS = 253402300799999
-- Drops the members of the sorted set `key` scored at `now` or before, at most `max` a call.
local function drop_before(key, now, max)
  local n = math.min(redis.call('ZCOUNT', key, '-inf', string.format('%d', now)), max)
  if n > 0 then redis.call('ZREMRANGEBYRANK', key, 0, n - 1) end
end
local function unreserve_expired(now)
  drop_before(KEYS[11], now, UNRESERVE_PER_CALL)
end
local function reserve(pairs, now)
  if #pairs == 0 then return end
  -- Formatted once a window (a flow's steps share theirs).
  local untils = {}
  for i = 1, #pairs, 2 do
    local w = pairs[i]
    local u = untils[w]
    if not u then
      u = string.format('%d', math.min(now + w, MAX_DUE_MS))
      untils[w] = u
    end
    pairs[i] = u
  end
  redis.call('ZADD', KEYS[11], unpack(pairs))
  unreserve_expired(now)
end

-- Ends: kept results and waits (results/ in delayq-core). KEYS[15] waits (id -> until when,
-- ms, a producer waits for the message to end: outcome.lua), KEYS[16] results (id -> the
-- outcome kept: "<kind> <until ms>\n<body>", kind `done` with the handler's value as JSON, or
-- `cancelled`; read only until then), KEYS[17] results by end (id -> when it ended, ms: the
-- oldest go first). A message that a producer waits for ends (acked, dead, cancelled): the
-- script that ends it publishes "<id>\n<kind>\n<body>" on the topic's end channel (the wake
-- channel's name with ':end') and drops the wait. While nobody waits this costs one TYPE a
-- call.
local RESULT_DROP_PER_CALL = 1000
-- A value-less end (a handler that returns none) that a producer waits for is kept this long,
-- so that a wait whose announcement was lost (a subscriber that reconnected) still reads it.
local HEARD_END_MS = 60000

-- Drops the waits whose time passed, at most RESULT_DROP_PER_CALL a call (outcome.lua and the
-- back pool's sweep): a producer that gave up, or was gone, leaves nothing behind.
local function unwait_expired(now)
  drop_before(KEYS[15], now, RESULT_DROP_PER_CALL)
end

-- Drops, at most RESULT_DROP_PER_CALL a call, the kept outcomes that ended more than `ttl_ms`
-- ago (when given) and the oldest past `max` (when given), counting the latter in
-- `results_dropped` of KEYS[9]. Returns how many it dropped past `max`.
local function trim_results(now, max, ttl_ms)
  local expired = 0
  if ttl_ms then
    expired = math.min(redis.call('ZCOUNT', KEYS[17], '-inf', string.format('%d', now - ttl_ms)),
      RESULT_DROP_PER_CALL)
  end
  local over = 0
  if max then
    over = math.min(redis.call('ZCARD', KEYS[17]) - expired - max, RESULT_DROP_PER_CALL - expired)
    if over < 0 then over = 0 end
  end
  local n = expired + over
  if n == 0 then return 0 end
  local ids = redis.call('ZRANGE', KEYS[17], 0, n - 1)
  redis.call('ZREMRANGEBYRANK', KEYS[17], 0, n - 1)
  redis.call('HDEL', KEYS[16], unpack(ids))
  if over > 0 then redis.call('HINCRBY', KEYS[9], 'results_dropped', over) end
  return over
end

-- Keeps outcome `kind` (`done`, `cancelled`) with `body` for `id` until now + ttl_ms.
local function keep_result(id, kind, body, now, ttl_ms)
  redis.call('HSET', KEYS[16], id,
    string.format('%s %d\n', kind, math.min(now + ttl_ms, MAX_DUE_MS)) .. body)
  redis.call('ZADD', KEYS[17], string.format('%d', now), id)
end

-- A flow step's message (its id holds the unit separator, which no user id can) ended: noted
-- in KEYS[18] until the client settles it in its flow (delayq-core's workflow/), scored by
-- when it ended, negated when it did not succeed (dead or cancelled): how it ended is kept
-- with the note, whatever becomes of its kept result.
local function step_ended(id, now, ok)
  if string.find(id, '\31', 1, true) then
    redis.call('ZADD', KEYS[18], ok and now or -now, id)
  end
end

-- Announces the ends of `ids` (from `from` to `to`) that producers wait for. `bodies`: nil
-- (done without a value: "null", kept HEARD_END_MS), a table with the same indexes, or a
-- string for all. A `waits` key of another type (a hand edit) counts as no wait: the end is
-- not announced, and a wait reads it later.
local function announce_ends(ids, from, to, kind, bodies)
  if to < from or redis.call('TYPE', KEYS[15])['ok'] ~= 'zset' then return end
  local until_ms = redis.call('ZMSCORE', KEYS[15], unpack(ids, from, to))
  local gone, channel, now = {}, ARGV[1] .. ':end', nil
  for i = from, to do
    if until_ms[i - from + 1] then
      local body = bodies or 'null'
      if type(body) == 'table' then body = body[i] end
      redis.call(ARGV[2], channel, ids[i] .. '\n' .. kind .. '\n' .. body)
      gone[#gone + 1] = ids[i]
      if kind == 'done' and bodies == nil then
        now = now or now_ms()
        keep_result(ids[i], 'done', 'null', now, HEARD_END_MS)
      end
    end
  end
  if #gone > 0 then redis.call('ZREM', KEYS[15], unpack(gone)) end
end

-- Acks deliveries (ack.lua, and claim_due.lua for the acks that ride on a claim): ARGV[at] n,
-- ARGV[at + 1] g, then g pairs of delivery token, how many ids follow under it, then the n
-- ids in that order (so a token many deliveries share, one claim's, is passed once), then
-- pairs of id, `dedup_for` window (ms) to the end, for the messages sent with one (the client
-- read the window from the envelope it was given), and of id, -1 for flow steps' messages.
-- Finished deliveries leave `inflight` and their envelopes are deleted. Returns a string of one character per id, in their order: '1'
-- acked, '0' stale (that delivery no longer owns the message). The token is checked against
-- the one kept beside the envelope (see `token_field`), so an ack reads no envelope; a claim
-- an earlier build made is checked against its envelope. `now` (ms): when known.
-- When every token matches (the usual case), the ids go to Redis straight from ARGV, and no
-- table is built for them: a table grown an element at a time is rehashed at every power of
-- two, which cost more than the commands.
local function ack_receipts(at, now)
  local ARGV = ARGV -- a local: read for every message, a global lookup each time
  local n = tonumber(ARGV[at]) or 0
  if n == 0 then return '' end
  local g = tonumber(ARGV[at + 1])
  local first = at + 2 + 2 * g
  local last = first + n - 1
  local sum = 0
  for group = 1, g do sum = sum + tonumber(ARGV[at + 1 + 2 * group]) end
  if sum ~= n then error('delayq ack: the groups hold ' .. sum .. ' ids, not ' .. n) end
  -- Windows to reserve follow the ids.
  local windows = #ARGV > last
  local fields = {}
  -- (`token_field`, inlined: a call a message is not free.)
  for i = 1, n do fields[i] = ARGV[first - 1 + i] .. '\n' end
  local held = redis.call('HMGET', KEYS[3], unpack(fields))
  -- Counted, not `#t` (a binary search in Lua 5.1): these loops run for every message.
  local all, i = true, 0
  for group = 1, g do
    local token, k = ARGV[at + 2 * group], tonumber(ARGV[at + 1 + 2 * group])
    for _ = 1, k do
      i = i + 1
      if held[i] ~= token then all = false end
    end
  end
  local out, nd, acked, done
  if all then
    redis.call('ZREM', KEYS[2], unpack(ARGV, first, last))
    redis.call('HDEL', KEYS[3], unpack(ARGV, first, last))
    redis.call('HDEL', KEYS[3], unpack(fields))
    out, nd = string.rep('1', n), n
  else
    local gone, answers, ng = {}, {}, 0
    done = {}
    nd, acked, i = 0, {}, 0
    for group = 1, g do
      local token, k = ARGV[at + 2 * group], tonumber(ARGV[at + 1 + 2 * group])
      for _ = 1, k do
        i = i + 1
        local id, h = ARGV[first - 1 + i], held[i]
        local ok
        if h then
          ok = h == token
        else
          -- No token beside it: not in flight (stale), or claimed by an earlier build.
          ok = redis.call('ZSCORE', KEYS[2], id) ~= false
            and token_of(redis.call('HGET', KEYS[3], id)) == tonumber(token)
        end
        if ok then
          nd = nd + 1
          done[nd] = id
          ng = ng + 1
          gone[ng] = id
          if h then
            ng = ng + 1
            gone[ng] = fields[i]
          end
          acked[id] = true
          answers[i] = '1'
        else
          answers[i] = '0'
        end
      end
    end
    if nd > 0 then
      redis.call('ZREM', KEYS[2], unpack(done))
      redis.call('HDEL', KEYS[3], unpack(gone))
    end
    out = table.concat(answers)
  end
  if nd > 0 then
    if all then announce_ends(ARGV, first, last, 'done') else announce_ends(done, 1, nd, 'done') end
    now = now or now_ms()
    count('ok', nd, now)
    -- Sent with `dedup_for`: the id stays reserved for the window (see `reserve`). A flow
    -- step's comes as -(window + 1): its end is noted for its flow (see `step_ended`), and
    -- its id reserved for the window.
    if windows then
      local reserved, steps, at_ms = {}, {}, nil
      for j = last + 1, #ARGV - 1, 2 do
        if all or acked[ARGV[j]] then
          local window = tonumber(ARGV[j + 1])
          if window < 0 then
            at_ms = at_ms or string.format('%d', now)
            steps[#steps + 1] = at_ms
            steps[#steps + 1] = ARGV[j]
            window = -window - 1
          end
          if window > 0 then
            reserved[#reserved + 1] = window
            reserved[#reserved + 1] = ARGV[j]
          end
        end
      end
      reserve(reserved, now)
      if #steps > 0 then redis.call('ZADD', KEYS[18], unpack(steps)) end
    end
  end
  return out
end

-- The `dedup_for` window of a raw envelope from its header alone (0 for none, or when the
-- header does not parse).
local function dedup_of(raw)
  if type(raw) ~= 'string' then return 0 end
  return tonumber(string.match(raw, '^1 %d+ %d+ %d+ %d+ %d+ %d+ %d+ %d+ (%d+)[ \n]')) or 0
end

-- Priorities. A topic that has had a message with a priority other than the default (send.lua
-- sets `prio` in KEYS[9]) claims through KEYS[12] `ready`: claim_due first moves every due
-- message of `delayed` there (claiming nothing until none is left behind), scored by priority,
-- then due time, and claims from its head. So among all due messages the highest priority
-- goes first. The priorities of the messages in `delayed` are indexed in KEYS[14] (only those
-- that are not the default, `index_priority`), so that the move reads no envelope. A message
-- in `ready` is delayed and due: every script that looks for a delayed message looks there
-- too. A topic that never used priorities never has `ready` nor the index.
-- A priority's block of READY_BLOCK ms holds due times from READY_OFFSET ms before 1970 to as
-- long after (the year 2248; the test kit's advance moves due times before 1970); outside,
-- due times are cut to that range.
local READY_BLOCK = 17592186044416 -- 2^44 ms
local READY_OFFSET = 8796093022208 -- 2^43 ms
local function ready_score(priority, due)
  local d = math.max(0, math.min(due + READY_OFFSET, READY_BLOCK - 1))
  -- A half millisecond marks a message `rate_per_key` already gave a start (claim_due.lua):
  -- it keeps the mark in `ready`.
  if d % 1 ~= 0 then
    return string.format('%d.5', (255 - priority) * READY_BLOCK + math.floor(d))
  end
  return string.format('%d', (255 - priority) * READY_BLOCK + d)
end
-- The priority of a `ready` score.
local function ready_priority(score)
  return 255 - math.floor(tonumber(score) / READY_BLOCK)
end
-- Notes priority `p` of `id`, now in `delayed`, when it is not the default.
local function index_priority(id, p)
  if p ~= DEFAULT_PRIORITY then redis.call('HSET', KEYS[14], id, p) end
end

-- Stores envelope `raw` of `id` in the hot keys, waiting in `delayed` with `score` (its due
-- time, or now for a message handed back; a string), its priority indexed (`to_delayed` does
-- the same with an envelope table and a number). While `hot_writes` is a
-- table (send.lua, whose ids are distinct and read nothing another message of the call
-- writes), the HSET and ZADD wait there for one of each a call (`flush_hot_writes`): a
-- `redis.call` costs about as much as the command itself.
local hot_writes = nil
local function store_hot(id, raw, score, priority)
  if hot_writes then
    local h, z = hot_writes.h, hot_writes.z
    h[#h + 1] = id
    h[#h + 1] = raw
    z[#z + 1] = score
    z[#z + 1] = id
  else
    redis.call('HSET', KEYS[3], id, raw)
    redis.call('ZADD', KEYS[1], score, id)
  end
  index_priority(id, priority)
end
local function to_delayed(id, m, score)
  -- The score as a string: Redis formats a Lua number with %.17g, dearer still.
  store_hot(id, encode(m), score % 1 == 0 and int(score) or score,
    m.priority or DEFAULT_PRIORITY)
end
-- Runs `cmd key args...` 1,000 of `args` a command (Lua's `unpack` takes some 8,000 values at
-- most; an even count, so pairs stay whole); the replies' elements in order, when the replies
-- are arrays (HMGET's: one per argument).
local function call_in_chunks(cmd, key, args)
  local replies = {}
  for first = 1, #args, 1000 do
    local r = redis.call(cmd, key, unpack(args, first, math.min(first + 999, #args)))
    if type(r) == 'table' then
      for k = 1, #r do replies[first + k - 1] = r[k] end
    end
  end
  return replies
end
-- Writes what waits in `hot_writes`, 500 messages a command, and writes at once from then on.
local function flush_hot_writes()
  call_in_chunks('HSET', KEYS[3], hot_writes.h)
  call_in_chunks('ZADD', KEYS[1], hot_writes.z)
  hot_writes = nil
end

-- The message key of a raw envelope from its header (`SendOptions::key`; '' for none, or when
-- the header does not parse): the messages of one key share `rate_per_key`.
local function key_of(raw)
  if type(raw) ~= 'string' then return '' end
  local el, rl, tl, kl, body = string.match(raw,
    '^1 %d+ %d+ %d+ %d+ %d+ (%d+) (%d+) (%d+) %d+ %d+ (%d+)\n()')
  if not el then return '' end
  local from = body + el + rl + tl
  return string.sub(raw, from, from + kl - 1)
end
-- The due time of a `ready` score.
local function ready_due(score)
  return tonumber(score) % READY_BLOCK - READY_OFFSET
end

-- `rate_per_key`: keys whose time (KEYS[13], µs) has passed need no state: they go, at most
-- 1,000 a call (claims of the topic and the back pool's sweep call it, so a key that went
-- quiet is gone within about two minutes of its window even when nothing else happens).
local function prune_key_times(now_us)
  local n = math.min(redis.call('ZCOUNT', KEYS[13], '-inf', string.format('%d', now_us)), 1000)
  if n > 0 then redis.call('ZREMRANGEBYRANK', KEYS[13], 0, n - 1) end
end

-- Moves an id to the dead letters, keeping its envelope (with the reason) in msg; a message
-- sent with `dedup_for` has finished: its id stays reserved for the window.
local function bury(id, m, reason, now)
  m.dead_reason = reason
  redis.call('HSET', KEYS[3], id, encode(m))
  redis.call('ZADD', KEYS[4], now, id)
  if (m.dedup or 0) > 0 then reserve({ m.dedup, id }, now) end
  step_ended(id, now, false)
  announce_ends({ id }, 1, 1, 'dead', reason)
end

-- Dead letters past the topic's bounds (`dead_max` kept at most, each for `dead_ttl_ms`) are
-- dropped, oldest first, envelopes and all, and counted in `dead_dropped` of KEYS[9]. One call drops at most
-- DEAD_DROP_PER_CALL (a lowered bound is reached over a few calls); the back pool's sweep
-- calls it at least every two minutes, so expired letters go without new deaths. Returns how
-- many it dropped. `max` is nil for a caller that passes no bounds (then nothing is dropped).
local DEAD_DROP_PER_CALL = 1000 -- queue.rs' DEAD_DROP_PER_CALL
local function trim_dead(now, max, ttl_ms)
  max, ttl_ms = tonumber(max), tonumber(ttl_ms)
  if not max or not ttl_ms then return 0 end
  local over = redis.call('ZCARD', KEYS[4]) - max
  local expired = redis.call('ZCOUNT', KEYS[4], '-inf', '(' .. string.format('%d', now - ttl_ms))
  local n = math.min(math.max(over, expired), DEAD_DROP_PER_CALL)
  if n <= 0 then return 0 end
  local ids = redis.call('ZRANGE', KEYS[4], 0, n - 1)
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, n - 1)
  redis.call('HDEL', KEYS[3], unpack(ids))
  redis.call('HINCRBY', KEYS[9], 'dead_dropped', n)
  return n
end
