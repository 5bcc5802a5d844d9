-- prelude.lua: shared by the workflow scripts (the parts a script uses are prepended).
--
-- Every script of a flow takes its keys in this order, all under the flow's hash tag
-- (`ns:{flow:<id>}:...`), so on a cluster a flow lives in a slot of its own, apart from its
-- steps' topics:
--   KEYS[1] meta     HASH: state (running, done, failed, cancelled), reason, created, ended,
--                    steps, left (steps not ended), ttl (ms it is kept once it ended),
--                    starting (no step sent or ran yet: the keys expire, see create.lua),
--                    unsent (the start has not sent all its first steps yet)
--   KEYS[2] rec      HASH step name -> its fixed record: JSON of its topic, options and
--                    `next` (the steps that wait for it, with the policy of each edge), then
--                    a newline and JSON of `after` (the steps it waits for; see
--                    `record_parts`)
--   KEYS[3] state    HASH step name -> "<state> <gen> <sent ms> <ended ms>\n<reason>"
--   KEYS[4] waiting  HASH step name -> how many of its dependencies have not ended as it needs
--   KEYS[5] payload  HASH step name -> its payload (JSON)
--   KEYS[6] out      SET of the steps ready to be sent to their topics (the flow's outbox)
-- and ARGV[1] the flow's end channel, ARGV[2] the command that publishes on it.
--
-- A step is `waiting` (for dependencies), `ready` (in `out`: to be sent), `sent` (a message of
-- its topic, id "<flow>\31<step>\31<gen>"), `done`, `failed` (dead, or a dependency it needed
-- failed) or `cancelled`. `gen` counts the step's runs by retry_flow: a message of an older
-- gen that ends changes nothing. Scripts change the flow; the messages are sent, and ended
-- steps reported, by the client, each call idempotent, so that a crash between any two calls
-- loses nothing and runs nothing twice (see workflow/mod.rs).

local FINAL = { done = true, failed = true, cancelled = true }

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Steps' states and records go through a cache for the call: read once (`prefetch` reads
-- many in one HMGET), states written back by `flush` (one HSET for all, in the order first
-- written), which every script that puts a state calls before it returns. A call over many
-- steps makes a few commands, not a few a step.
local CACHE = { state = {}, rec = {}, dirty = {} }

local function parse_state(raw)
  if not raw then return nil end
  local s, gen, sent, ended, reason = string.match(raw, '^(%a+) (%d+) (%d+) (%d+)\n(.*)$')
  if not s then return nil end
  return { state = s, gen = tonumber(gen), sent = tonumber(sent), ended = tonumber(ended),
    reason = reason }
end

local function get_state(name)
  local raw = CACHE.state[name]
  if raw == nil then
    raw = redis.call('HGET', KEYS[3], name) or false
    CACHE.state[name] = raw
  end
  return parse_state(raw)
end

-- The state `raw` (as `put_state` writes it) for step `name`.
local function put_raw(name, raw)
  if CACHE.dirty[name] == nil then
    CACHE.dirty[#CACHE.dirty + 1] = name
    CACHE.dirty[name] = true
  end
  CACHE.state[name] = raw
end

local function put_state(name, st)
  put_raw(name, string.format('%s %d %d %d\n%s', st.state, st.gen, st.sent or 0,
    st.ended or 0, st.reason or ''))
end

-- HSET of a flat list of fields and values, a thousand pairs a command.
local function hset_all(key, args)
  for i = 1, #args, 2000 do
    redis.call('HSET', key, unpack(args, i, math.min(i + 1999, #args)))
  end
end

local function flush()
  local names, args = CACHE.dirty, {}
  for i = 1, #names do
    args[#args + 1] = names[i]
    args[#args + 1] = CACHE.state[names[i]]
  end
  hset_all(KEYS[3], args)
  CACHE.dirty = {}
end

-- HGETALL's reply of the states key, into the cache (what it holds is the truth until put).
local function prime_states(flat)
  for i = 1, #flat, 2 do
    if CACHE.state[flat[i]] == nil then CACHE.state[flat[i]] = flat[i + 1] end
  end
end

-- A record's two parts: the JSON of its topic, options and `next`, and (after the first
-- newline, which no JSON text holds) the JSON of its `after`, or nil for a record of one JSON
-- (written by an earlier build, `after` within). Only retry.lua and add.lua read `after`: the
-- scripts that run every step decode the first part alone (a fan-in's last step waits for
-- thousands).
local function record_parts(raw)
  local nl = string.find(raw, '\n', 1, true)
  if nl then return string.sub(raw, 1, nl - 1), string.sub(raw, nl + 1) end
  return raw, nil
end

-- The steps `name` waits for, as { { name, policy }, ... } (empty for none, or unreadable).
local function record_after(name)
  local raw = redis.call('HGET', KEYS[2], name)
  if not raw then return {} end
  local main, after = record_parts(raw)
  local ok, got = pcall(cjson.decode, after or main)
  if not ok or type(got) ~= 'table' then return {} end
  if not after then got = got.after end
  return type(got) == 'table' and got or {}
end

-- Decoded records by their text: a fan-out's or a fan-in's siblings share one (the same
-- topic, options and edges), decoded once a call: a table `record` gives is shared, and
-- never changed (add.lua decodes its own copy of the record it changes).
local DECODED = {}

local function decode_record(raw)
  if not raw then return false end
  local rec = DECODED[raw]
  if rec ~= nil then return rec end
  local ok, got = pcall(cjson.decode, (record_parts(raw)))
  rec = ok and type(got) == 'table' and got or false
  DECODED[raw] = rec
  return rec
end

local function record(name)
  local rec = CACHE.rec[name]
  if rec == nil then
    rec = decode_record(redis.call('HGET', KEYS[2], name))
    CACHE.rec[name] = rec
  end
  return rec or nil
end

-- The states of `names` (from `from` to `to`), and their records unless `states_only`, read
-- in one HMGET each.
local function prefetch(names, from, to, states_only)
  for a = from, to, 1000 do
    local b = math.min(a + 999, to)
    local states = redis.call('HMGET', KEYS[3], unpack(names, a, b))
    local recs = (not states_only) and redis.call('HMGET', KEYS[2], unpack(names, a, b))
    for i = a, b do
      local name = names[i]
      if CACHE.state[name] == nil then CACHE.state[name] = states[i - a + 1] end
      if recs and CACHE.rec[name] == nil then CACHE.rec[name] = decode_record(recs[i - a + 1]) end
    end
  end
end

-- Every key of the flow, kept `ms` more (nil: for good).
local function keep_for(ms)
  for i = 1, 6 do
    if ms then redis.call('PEXPIRE', KEYS[i], ms) else redis.call('PERSIST', KEYS[i]) end
  end
end

-- A step of the flow was sent, or ran: it was started, whatever became of the start's last
-- call, and is kept for good while it runs (until then its keys expire: see create.lua).
local function started(flow_state)
  if redis.call('HGET', KEYS[1], 'starting') then
    redis.call('HDEL', KEYS[1], 'starting')
    if flow_state == 'running' then keep_for(nil) end
  end
end

-- The flow ended (every step ended) or failed: kept `ttl` from now; its waits hear it.
local function flow_ended(state, reason, now)
  redis.call('HSET', KEYS[1], 'state', state, 'ended', now)
  if reason then redis.call('HSET', KEYS[1], 'reason', reason) end
  keep_for(tonumber(redis.call('HGET', KEYS[1], 'ttl')))
  redis.call(ARGV[2], ARGV[1], state)
end

-- The steps this call made ready (the client sends the outbox only when there are some).
local MADE_READY = { n = 0 }
-- Dependencies ended, by dependent, applied together by `apply_less` (a fan-in's steps that
-- end in one call count down their dependent once).
local LESS = { order = {}, n = {} }

-- One dependency of `d` ended as `d` needs (done, or failed behind an Ignore edge): `d` is
-- ready once none is left (see `apply_less`).
local function one_less(d)
  if not LESS.n[d] then
    LESS.order[#LESS.order + 1] = d
    LESS.n[d] = 0
  end
  LESS.n[d] = LESS.n[d] + 1
end

local function apply_less()
  local ready = {}
  for _, d in ipairs(LESS.order) do
    if redis.call('HINCRBY', KEYS[4], d, -LESS.n[d]) <= 0 then
      local st = get_state(d)
      if st and st.state == 'waiting' then
        st.state = 'ready'
        put_state(d, st)
        ready[#ready + 1] = d
      end
    end
  end
  for i = 1, #ready, 1000 do
    redis.call('SADD', KEYS[6], unpack(ready, i, math.min(i + 999, #ready)))
  end
  MADE_READY.n = MADE_READY.n + #ready
  LESS.order, LESS.n = {}, {}
end

-- Step `name` failed (`reason`): each dependent behind a Fail edge fails too, without running,
-- and so on down; behind an Ignore edge it counts as ended. Returns the first failure that
-- fails the flow (a step with a Fail edge, or with no dependent at all), or nil. Counts the
-- steps that ended in `left`.
local function fail(name, st, reason, now)
  -- A step is marked failed when it is queued, so that one reached by two paths fails once.
  local function mark(fname, fst, freason)
    fst.state, fst.reason, fst.ended = 'failed', freason, now
    put_state(fname, fst)
    redis.call('SREM', KEYS[6], fname)
  end
  mark(name, st, reason)
  local failing, first = { { name, reason } }, nil
  local ended = 1
  while #failing > 0 do
    local f = table.remove(failing)
    local fname, freason = f[1], f[2]
    local rec = record(fname) or {}
    local nexts = rec.next or {}
    local fails_flow = #nexts == 0
    for _, edge in ipairs(nexts) do
      local d, policy = edge[1], edge[2]
      if policy == 'ignore' then
        one_less(d)
      else
        fails_flow = true
        local dst = get_state(d)
        if dst and (dst.state == 'waiting' or dst.state == 'ready') then
          local why = 'after ' .. fname .. ' failed: ' .. freason
          mark(d, dst, why)
          ended = ended + 1
          failing[#failing + 1] = { d, why }
        end
      end
    end
    if fails_flow and not first then first = fname .. ': ' .. freason end
  end
  redis.call('HINCRBY', KEYS[1], 'left', -ended)
  return first
end

-- The flow's outbox: { name, gen, topic, options JSON, payload } of each step ready to send,
-- at most `max` (the client sends a page, marks it sent, and reads the next); and how many
-- members it dropped that were not ready any more (the page may be short for them).
local function outbox(max)
  local out, dropped, names = {}, 0, redis.call('SRANDMEMBER', KEYS[6], max)
  prefetch(names, 1, #names)
  local payloads = #names > 0 and redis.call('HMGET', KEYS[5], unpack(names)) or {}
  local gone = {}
  for i, name in ipairs(names) do
    local st, rec = get_state(name), record(name)
    if st and rec and st.state == 'ready' then
      out[#out + 1] = { name, st.gen, rec.topic, cjson.encode(rec.opts or {}), payloads[i] or 'null' }
    else
      gone[#gone + 1] = name
      dropped = dropped + 1
    end
  end
  if #gone > 0 then redis.call('SREM', KEYS[6], unpack(gone)) end
  return out, dropped
end
