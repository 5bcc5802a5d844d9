-- release.lua: a clean shutdown hands claimed, unfinished deliveries back to `delayed`, due
-- now, and gives back the attempt the claim counted (see `owned`).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- from ARGV[3]: pairs of id, delivery token
-- Returns the number handed back (stale pairs are skipped).
local now = now_ms()
local n = 0
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local m = owned(id, ARGV[i + 1])
  if m then
    if m.attempt > 0 then m.attempt = m.attempt - 1 end
    to_delayed(id, m, now)
    redis.call('ZREM', KEYS[2], id)
    claim_ended(id)
    n = n + 1
  end
end
if n > 0 then wake(WAKE_BOSS) end
return n
