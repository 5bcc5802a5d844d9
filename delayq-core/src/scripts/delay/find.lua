-- find.lua: where one message is, with its envelope, for `delayq find` and the dashboard's
-- search. A bounded read: a few lookups by id, whatever the topic holds.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far buckets the id may be in)
-- ARGV[3] id
-- Returns {place, ms, envelope or false}: place 'inflight' (ms: its claim's deadline),
-- 'delayed' (ms: its due time; hot, due in `ready`, or far), 'dead' (ms: when it died),
-- 'finished' (ms: the end of its `dedup_for` reservation; no envelope) or 'unknown'.
local id = ARGV[3]
local t = id_time(id)
need_lookup(id, t, false)
local missing = missing_buckets()
if missing then return missing end
local function found(place, score, envelope)
  -- A time edited by hand below zero (or not a number) reads as 0, never as an error.
  local ms = math.max(0, math.floor(tonumber(score) or 0))
  return { place, string.format('%d', ms), envelope or false }
end
local s = redis.call('ZSCORE', KEYS[2], id)
if s then
  -- As its delivery sees it: this claim's attempt counted and its token (see `owned`).
  local got = redis.call('HMGET', KEYS[3], id, token_field(id))
  return found('inflight', s, got[2] and bump(got[1], got[2]) or got[1])
end
s = redis.call('ZSCORE', KEYS[4], id)
if s then return found('dead', s, redis.call('HGET', KEYS[3], id)) end
s = redis.call('ZSCORE', KEYS[1], id)
if s then return found('delayed', s, redis.call('HGET', KEYS[3], id)) end
s = redis.call('ZSCORE', KEYS[12], id)
if s then return found('delayed', ready_due(s), redis.call('HGET', KEYS[3], id)) end
local b = far_bucket(id, t)
if b then
  local raw = redis.call('HGET', far_key(b), id)
  local m = far_decode(raw, b)
  if m then return found('delayed', m.due_ms, encode(m)) end
  -- A record edited by hand: where it is (due in its bucket's minute, at the latest), as it is.
  if raw then return found('delayed', b * width(), raw) end
end
s = redis.call('ZSCORE', KEYS[11], id)
if s then return found('finished', s, false) end
return { 'unknown', '0', false }
