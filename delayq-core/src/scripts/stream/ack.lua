-- stream/ack.lua: acks entries the group handled (XACK, one id at a time so that each gets
-- its own answer).
-- KEYS, ARGV[1], ARGV[2]: as in stream/prelude.lua
-- from ARGV[3]: entry ids
-- Returns one integer per id: 1 acked, 0 no longer pending in the group (acked already or
-- dead-lettered). An entry taken over by another consumer is still acked: it was handled.
local out = {}
for i = 3, #ARGV do
  out[#out + 1] = redis.call('XACK', KEYS[1], ARGV[1], ARGV[i])
end
return out
