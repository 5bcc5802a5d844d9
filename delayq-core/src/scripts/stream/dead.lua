-- stream/dead.lua: moves an entry this consumer holds to the dead-letter stream, with fields
-- id, group, deliveries, reason and payload, and acks it.
-- KEYS, ARGV[1], ARGV[2]: as in stream/prelude.lua
-- ARGV[3] entry id   ARGV[4] reason   ARGV[5] dead_max   ARGV[6] dead_ttl ms (see trim_dead)
-- Returns { 1 moved or 0 stale (this consumer no longer holds it), dead letters dropped }.
local deliveries = held_by(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
if not deliveries then
  return { 0, 0 }
end
bury(KEYS[1], KEYS[2], ARGV[1], ARGV[3], deliveries, ARGV[4])
return { 1, trim_dead(KEYS[2], ARGV[1], ARGV[5], ARGV[6]) }
