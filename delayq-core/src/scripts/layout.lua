-- layout.lua: a namespace's layout version: marks a new namespace with this build's, else
-- reads what it holds. (Its own file, without the topic prelude: it touches no topic.)
-- KEYS[1] ns:layout   ARGV[1] this build's layout version   ARGV[2] the version it upgrades in
-- place (it reads that layout as it is, and marks it with its own)
-- Returns the version the namespace holds now.
local held = redis.call('GET', KEYS[1])
if not held or held == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return held
