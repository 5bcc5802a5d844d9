-- add.lua: a running step adds a step to its flow (a fan-out known only when it runs): the new
-- step is ready at once, and every step that waits for the running one waits for it too,
-- under the same edge policy. Adding a name that exists changes nothing (a run of the step
-- that is retried adds again).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] the running step's name   ARGV[4] the new step's name   ARGV[5] its record (JSON,
-- without edges)   ARGV[6] its payload
-- Returns 'added', 'exists', 'gone' (no such flow, or it is not running) or 'unknown' (the
-- running step is not one of the flow's).
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'running' then return 'gone' end
local parent, name = ARGV[3], ARGV[4]
if redis.call('HEXISTS', KEYS[2], name) == 1 then return 'exists' end
local prec = record(parent)
if not prec then return 'unknown' end
local rec = cjson.decode(ARGV[5])
rec.after = {}
rec.next = {}
for _, edge in ipairs(prec.next or {}) do
  local d, policy = edge[1], edge[2]
  local dst = get_state(d)
  if dst and dst.state == 'waiting' then
    redis.call('HINCRBY', KEYS[4], d, 1)
    rec.next[#rec.next + 1] = { d, policy }
    local drec = record(d)
    if drec then
      drec.after = drec.after or {}
      drec.after[#drec.after + 1] = { name, policy }
      redis.call('HSET', KEYS[2], d, cjson.encode(drec))
    end
  end
end
if #rec.next == 0 then rec.next = nil end
redis.call('HSET', KEYS[2], name, cjson.encode(rec))
redis.call('HSET', KEYS[5], name, ARGV[6])
put_state(name, { state = 'ready', gen = 0 })
redis.call('SADD', KEYS[6], name)
redis.call('HINCRBY', KEYS[1], 'steps', 1)
redis.call('HINCRBY', KEYS[1], 'left', 1)
return 'added'
