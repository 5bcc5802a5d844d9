-- pause.lua: pauses a topic (no process claims its messages until it is resumed) or resumes it.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] '1' to pause, '0' to resume
-- Returns 1 when the state changed, 0 when it already was so. A resume wakes every process's
-- boss, which claims what came due meanwhile.
if ARGV[3] == '1' then
  return redis.call('SET', KEYS[10], '1', 'NX') and 1 or 0
end
local changed = redis.call('DEL', KEYS[10])
if changed == 1 then wake(WAKE_BOSS) end
return changed
