-- replay_dead.lua: dead letters go back to `delayed`, due now, with a fresh attempt count.
-- KEYS[1] delayed   KEYS[2] msg   KEYS[3] dead
-- ARGV[1] wake channel   ARGV[2] 'one' or 'oldest'
-- ARGV[3] the id (for 'one'), or how many dead letters to look at (for 'oldest')
-- ARGV[4] for 'oldest': how many of the oldest to pass over (those left dead by earlier calls)
-- Returns { replayed, left dead }. A dead letter whose envelope does not parse stays dead.
local ids
if ARGV[2] == 'one' then
  ids = { ARGV[3] }
else
  local skip = tonumber(ARGV[4])
  ids = redis.call('ZRANGE', KEYS[3], skip, skip + tonumber(ARGV[3]) - 1)
end
local now = now_ms()
local n, left = 0, 0
for _, id in ipairs(ids) do
  if redis.call('ZSCORE', KEYS[3], id) then
    local m = decode(redis.call('HGET', KEYS[2], id))
    if m then
      m.attempt = 0
      m.reason = ''
      m.due = now
      redis.call('HSET', KEYS[2], id, encode(m))
      redis.call('ZREM', KEYS[3], id)
      redis.call('ZADD', KEYS[1], now, id)
      n = n + 1
    else
      left = left + 1
    end
  end
end
if n > 0 then wake(ARGV[1], 'd') end
return { n, left }
