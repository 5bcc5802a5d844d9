-- claim_due.lua: due messages move from `delayed` to `inflight` with an ack deadline.
-- KEYS[1] delayed   KEYS[2] inflight   KEYS[3] msg   KEYS[4] dead
-- ARGV[1] wake channel   ARGV[2] max count   ARGV[3] lease ms (deadline = now + lease)
-- Returns { now_us, next_due_ms or -1, id1, envelope1, id2, envelope2, ... } (now in
-- microseconds, so a boss can sleep to the due time precisely); attempt and
-- deliveries in each returned envelope are already incremented. An id whose envelope is
-- missing comes back with 'orphan' (dropped); one that does not parse with 'corrupt'
-- (moved to the dead letters untouched).
local now_micros = now_us()
local now = math.floor(now_micros / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local out = { now_micros, -1 }
if #ids > 0 then
  local inflight_was_empty = redis.call('ZCARD', KEYS[2]) == 0
  local deadline = now + tonumber(ARGV[3])
  for _, id in ipairs(ids) do
    redis.call('ZREM', KEYS[1], id)
    local raw = redis.call('HGET', KEYS[3], id)
    local m = decode(raw)
    if m then
      m.attempt = m.attempt + 1
      m.deliveries = m.deliveries + 1
      local env = encode(m)
      redis.call('HSET', KEYS[3], id, env)
      redis.call('ZADD', KEYS[2], deadline, id)
      out[#out + 1] = id
      out[#out + 1] = env
    elseif raw then
      redis.call('ZADD', KEYS[4], now, id)
      out[#out + 1] = id
      out[#out + 1] = 'corrupt'
    else
      out[#out + 1] = id
      out[#out + 1] = 'orphan'
    end
  end
  if inflight_was_empty then wake(ARGV[1], 'i') end
end
out[2] = head_score(KEYS[1])
return out
