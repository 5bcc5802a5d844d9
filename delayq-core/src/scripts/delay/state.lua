-- state.lua: where one message is, for a read (a schedule's last tick).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far buckets the id may be in)
-- ARGV[3] id
-- Returns {state, attempt}: state 'inflight', 'delayed' (hot or far), 'dead' or 'none'
-- (unknown, acked or cancelled); attempt the handler runs so far (0 for 'none').
local id = ARGV[3]
local t = id_time(id)
need_lookup(id, t, false)
local missing = missing_buckets()
if missing then return missing end
local function attempt()
  local m = decode(redis.call('HGET', KEYS[3], id))
  return m and m.attempt or 0
end
if redis.call('ZSCORE', KEYS[2], id) then
  -- Its claim's attempt counts once the claim ends (see `owned`): it is running now.
  local got = redis.call('HMGET', KEYS[3], id, token_field(id))
  local m = decode(got[1])
  return { 'inflight', (m and m.attempt or 0) + (got[2] and 1 or 0) }
end
if redis.call('ZSCORE', KEYS[4], id) then return { 'dead', attempt() } end
if redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[12], id) then
  return { 'delayed', attempt() }
end
local b = far_bucket(id, t)
if b then
  local m = far_decode(redis.call('HGET', far_key(b), id), b)
  return { 'delayed', m and m.attempt or 0 }
end
return { 'none', 0 }
