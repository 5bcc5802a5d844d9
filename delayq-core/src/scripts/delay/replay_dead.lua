-- replay_dead.lua: dead letters go back to `delayed`, due now, with a fresh attempt count.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] 'one' or 'oldest'
-- 'one':    ARGV[4] the id
-- 'oldest': ARGV[4] how many dead letters to look at   ARGV[5] how many of the oldest to pass
--           over (those left dead by earlier calls)   ARGV[6] the cutoff: only letters that
--           died at or before it (ms) are replayed; '' on the first call, which uses now.
--           A replay of all thus replays what was dead when it started, even while replayed
--           messages die again.
-- Returns { replayed, left dead, cutoff ms, letters dead at or before the cutoff before this
-- call replayed any }.
-- A dead letter whose envelope does not parse stays dead.
local now = now_ms()
local ids
local cutoff = now
if ARGV[3] == 'one' then
  ids = { ARGV[4] }
else
  if ARGV[6] ~= '' then cutoff = tonumber(ARGV[6]) end
  local skip = tonumber(ARGV[5])
  ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', cutoff, 'LIMIT', skip, tonumber(ARGV[4]))
end
local before = redis.call('ZCOUNT', KEYS[4], '-inf', cutoff)
local n, left = 0, 0
for _, id in ipairs(ids) do
  if redis.call('ZSCORE', KEYS[4], id) then
    local m = decode(redis.call('HGET', KEYS[3], id))
    if m then
      m.attempt = 0
      m.dead_reason = ''
      m.due_ms = now
      -- Pending again: its death's reservation (`dedup_for`) ends, as a pending id's sends
      -- behave as they always do; its next finish reserves the id again.
      if m.dedup > 0 then redis.call('ZREM', KEYS[11], id) end
      to_delayed(id, m, now)
      redis.call('ZREM', KEYS[4], id)
      n = n + 1
    else
      left = left + 1
    end
  end
end
if n > 0 then wake(WAKE_BOSS) end
return { n, left, cutoff, before }
