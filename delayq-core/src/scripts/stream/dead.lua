-- stream/dead.lua: moves an entry this consumer holds to the dead-letter stream, with fields
-- id, group, deliveries, reason and payload, and acks it.
-- KEYS, ARGV[1], ARGV[2]: as in stream/prelude.lua
-- ARGV[3] entry id   ARGV[4] reason
-- Returns 1 moved, 0 stale (this consumer no longer holds it).
local deliveries = held_by(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
if not deliveries then
  return 0
end
bury(KEYS[1], KEYS[2], ARGV[1], ARGV[3], deliveries, ARGV[4])
return 1
