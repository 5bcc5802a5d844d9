-- ack.lua: finished deliveries leave `inflight` and their envelopes are deleted.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] n, then n pairs of id, delivery token, then pairs of id, `dedup_for` window (ms) for
-- the messages sent with one (the client read the window from the envelope it was given).
-- Returns one integer per pair: 1 acked, 0 stale (that delivery no longer owns the message).
-- The token is checked against the one kept beside the envelope (see `token_field`), so an
-- ack reads no envelope; a claim an earlier build made is checked against its envelope.
local n = tonumber(ARGV[3])
local fields = {}
for i = 1, n do fields[i] = token_field(ARGV[2 + 2 * i]) end
local held = redis.call('HMGET', KEYS[3], unpack(fields))
local out, done, gone, acked = {}, {}, {}, {}
for i = 1, n do
  local id, token = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  local h = held[i]
  local ok
  if h then
    ok = h == token
  else
    -- No token beside it: not in flight (stale), or claimed by an earlier build.
    ok = redis.call('ZSCORE', KEYS[2], id) ~= false
      and token_of(redis.call('HGET', KEYS[3], id)) == tonumber(token)
  end
  if ok then
    done[#done + 1] = id
    gone[#gone + 1] = id
    if h then gone[#gone + 1] = fields[i] end
    acked[id] = true
    out[i] = 1
  else
    out[i] = 0
  end
end
if #done > 0 then
  redis.call('ZREM', KEYS[2], unpack(done))
  redis.call('HDEL', KEYS[3], unpack(gone))
  local now = now_ms()
  count('ok', #done, now)
  -- Sent with `dedup_for`: the id stays reserved for the window (see `reserve`).
  local reserved = {}
  for i = 4 + 2 * n, #ARGV - 1, 2 do
    if acked[ARGV[i]] then
      reserved[#reserved + 1] = tonumber(ARGV[i + 1])
      reserved[#reserved + 1] = ARGV[i]
    end
  end
  reserve(reserved, now)
end
return out
