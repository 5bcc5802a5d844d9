-- send.lua: new messages enter `delayed`, or their far bucket when due later than about two
-- minutes from now (one call for one message or a whole batch).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- then 7 per message from ARGV[3]: id, mode, when_kind, when, max_attempts, trace, payload
--   mode: 'new'     keep an existing message with that id (-> duplicate)
--         'replace' replace a pending (delayed, far or dead) one with that id
--   when_kind: 'delay' (ms from the server's now) or 'at' (unix ms)
--   trace: the sender's W3C traceparent, or ''
-- Returns one code per message: 'created', 'duplicate' or 'replaced'.
local now = now_ms()
local old_next = next_due()
local earliest = -1
local out = {}
for i = 3, #ARGV, 7 do
  local id, mode, kind = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local due = tonumber(ARGV[i + 3])
  if kind == 'delay' then due = now + due end
  local outcome = 'created'
  local t = id_time(id)
  if redis.call('HEXISTS', KEYS[3], id) == 1 then
    if redis.call('ZSCORE', KEYS[2], id) then
      outcome = 'duplicate'
    elseif redis.call('ZSCORE', KEYS[1], id) then
      if mode == 'replace' then
        outcome = 'replaced'
        redis.call('ZREM', KEYS[1], id)
      else
        outcome = 'duplicate'
      end
    elseif redis.call('ZREM', KEYS[4], id) == 1 then
      -- A dead message with this id is done with: the new send starts it afresh.
      outcome = 'created'
    end
    if outcome ~= 'duplicate' then redis.call('HDEL', KEYS[3], id) end
  else
    local b = far_bucket(id, t)
    if b then
      if mode == 'replace' then
        outcome = 'replaced'
        far_remove(id, b)
      else
        outcome = 'duplicate'
      end
    end
  end
  if outcome ~= 'duplicate' then
    -- Token 0 until claimed: claims draw theirs from `seq`, so a token is never reused even
    -- when this id was acked, cancelled or purged and is now sent again.
    local m = { attempt = 0, token = 0, max_attempts = tonumber(ARGV[i + 4]), enqueued_ms = now,
      due_ms = due, last_error = '', dead_reason = '', trace = ARGV[i + 5], payload = ARGV[i + 6] }
    local look = place(id, m, now, t)
    if earliest == -1 or look < earliest then earliest = look end
  end
  out[#out + 1] = outcome
end
far_flush()
-- Wake the bosses when this send moved the time they must look earlier, or when that time
-- has already come (then a boss may not know of it: a wake-up lost in a reconnect, or a
-- foreign write).
if earliest ~= -1 and (old_next == -1 or earliest < old_next or old_next <= now) then
  wake(WAKE_BOSS)
end
return out
