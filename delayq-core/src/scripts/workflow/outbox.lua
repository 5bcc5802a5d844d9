-- outbox.lua: the steps ready to be sent (for a start, a recovery, or after a retry).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] the most to return (a page; the client sends it, marks it sent, reads the next)
-- Returns { state of the flow (false: no such flow), { { name, gen, topic, options, payload },
-- ... }, how many members it dropped that were not ready any more }.
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return { false, {}, 0 } end
if state == 'cancelled' then return { state, {}, 0 } end
local out, dropped = outbox(tonumber(ARGV[3]))
return { state, out, dropped }
