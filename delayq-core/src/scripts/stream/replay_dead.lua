-- stream/replay_dead.lua: puts a dead letter back: its payload is added to the stream again
-- as a new entry marked for the group that buried it (field delayq-replay-for), and the dead
-- letter is deleted. Listeners of other groups ack such an entry without running.
-- KEYS, ARGV[1]: as in stream/prelude.lua (ARGV[2] unused)
-- ARGV[3] the dead letter's id in the dead-letter stream
-- Returns the new entry's id, or false when there is no such dead letter of the group.
local letter = redis.call('XRANGE', KEYS[2], ARGV[3], ARGV[3])
if #letter == 0 or field(letter[1][2], 'group') ~= ARGV[1] then
  return false
end
local fields = letter[1][2]
local id = redis.call('XADD', KEYS[1], '*', 'payload', field(fields, 'payload') or '',
  'delayq-replay-for', ARGV[1], 'delayq-replay-of', field(fields, 'id') or '')
redis.call('XDEL', KEYS[2], ARGV[3])
return id
