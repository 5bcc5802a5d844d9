-- ack.lua: finished deliveries leave `inflight` and their envelopes are deleted.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- from ARGV[3]: pairs of id, delivery token
-- Returns one integer per pair: 1 acked, 0 stale (that delivery no longer owns the message).
local ids, tokens = {}, {}
for i = 3, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
  tokens[#tokens + 1] = tonumber(ARGV[i + 1])
end
local deadlines = redis.call('ZMSCORE', KEYS[2], unpack(ids))
local raws = redis.call('HMGET', KEYS[3], unpack(ids))
local out, done, reserved = {}, {}, {}
for i, id in ipairs(ids) do
  if deadlines[i] and token_of(raws[i]) == tokens[i] then
    done[#done + 1] = id
    out[i] = 1
    -- Sent with `dedup_for`: the id stays reserved for the window (see `reserve`).
    local window = dedup_of(raws[i])
    if window > 0 then
      reserved[#reserved + 1] = window
      reserved[#reserved + 1] = id
    end
  else
    out[i] = 0
  end
end
if #done > 0 then
  redis.call('ZREM', KEYS[2], unpack(done))
  redis.call('HDEL', KEYS[3], unpack(done))
  local now = now_ms()
  count('ok', #done, now)
  reserve(reserved, now)
end
return out
