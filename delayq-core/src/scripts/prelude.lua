-- prelude.lua: shared by every delayq script (prepended when the script is loaded).
--
-- Envelope, the value stored in ns:{t}:msg under a message id:
--   "1 <attempt> <deliveries> <max_attempts> <enqueued_ms> <due_ms> <err_len> <reason_len>\n"
--   .. last_error .. dead_reason .. payload
-- attempt:    handler runs that counted (a clean shutdown hands one back)
-- deliveries: claims ever made; the fence token a delivery must present to ack/nack/extend
-- max_attempts: 0 means "the listener's default"
-- Times are milliseconds on the Redis server's clock.

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
  local v, a, d, m, e, due, el, rl = string.match(string.sub(raw, 1, nl - 1),
    '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')
  if v ~= '1' then return nil end
  el = tonumber(el)
  rl = tonumber(rl)
  if nl + el + rl > #raw then return nil end
  return {
    attempt = tonumber(a), deliveries = tonumber(d), max = tonumber(m),
    enq = tonumber(e), due = tonumber(due),
    err = string.sub(raw, nl + 1, nl + el),
    reason = string.sub(raw, nl + el + 1, nl + el + rl),
    payload = string.sub(raw, nl + el + rl + 1),
  }
end

local function encode(m)
  return string.format('1 %d %d %d %d %d %d %d\n', m.attempt, m.deliveries, m.max, m.enq, m.due,
    #m.err, #m.reason) .. m.err .. m.reason .. m.payload
end

-- The score of the earliest member of a sorted set, or -1 when it is empty.
local function head_score(key)
  local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if head[2] then return tonumber(head[2]) end
  return -1
end

-- The delivery token (deliveries) of an envelope, read from its header alone; nil when the
-- header does not parse.
local function token_of(raw)
  if type(raw) ~= 'string' then return nil end
  return tonumber(string.match(raw, '^1 %d+ (%d+) '))
end

-- The envelope with attempt and deliveries one higher (a new claim), rewriting only the
-- header; nil when the header does not parse.
local function bump(raw)
  if type(raw) ~= 'string' then return nil end
  local a, d, rest, body = string.match(raw, '^1 (%d+) (%d+) (%d+ %d+ %d+ %d+ %d+\n)()')
  if not a then return nil end
  return string.format('1 %d %d ', a + 1, d + 1) .. rest .. string.sub(raw, body)
end

-- The raw envelope of `id` when the delivery holding `token` still owns it (it is in flight
-- and no later claim happened), else nil. Reads only the header.
local function owned_raw(inflight, msg, id, token)
  if not redis.call('ZSCORE', inflight, id) then return nil end
  local raw = redis.call('HGET', msg, id)
  if token_of(raw) == tonumber(token) then return raw end
  return nil
end

-- The same, decoded, for scripts that rewrite the envelope.
local function owned(inflight, msg, id, token)
  local raw = owned_raw(inflight, msg, id, token)
  if raw then return decode(raw) end
  return nil
end

-- Tell sleeping bosses (kind 'd') or back pools (kind 'i') that a head moved earlier.
local function wake(channel, kind)
  redis.call('PUBLISH', channel, kind)
end

local function max_attempts(m, default)
  if m.max > 0 then return m.max end
  return tonumber(default)
end

-- Moves an id to the dead letters, keeping its envelope (with the reason) in msg.
local function bury(keys_dead, keys_msg, id, m, reason, now)
  m.reason = reason
  redis.call('HSET', keys_msg, id, encode(m))
  redis.call('ZADD', keys_dead, now, id)
end
