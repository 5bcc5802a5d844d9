-- add.lua: a running step adds a step to its flow (a fan-out known only when it runs): the new
-- step is ready at once, and every step that waits for the running one waits for it too,
-- under the same edge policy. Adding a name that exists changes nothing (a run of the step
-- that is retried adds again).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] the running step's name   ARGV[4] the new step's name   ARGV[5] its record (as
-- stored, see `record_parts`; its edges are made here)   ARGV[6] its payload   ARGV[7] the running step's gen (its message's)
-- ARGV[8] the most steps a flow may have
-- Returns 'added', 'exists' (this step added it before: a retried run), 'taken' (another step
-- of the flow has that name), 'gone' (no such flow, or it is not running), 'unknown' (the
-- running step is not one of the flow's), 'stale' (that step is not running this gen: it
-- ended, or was run again by retry_flow) or 'full'.
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'running' then return 'gone' end
local parent, name = ARGV[3], ARGV[4]
local prec = record(parent)
if not prec then return 'unknown' end
-- Running: sent (or ready: it ran before its start marked it sent), at this gen.
local pst = get_state(parent)
if not pst or pst.gen ~= tonumber(ARGV[7]) or (pst.state ~= 'sent' and pst.state ~= 'ready') then
  return 'stale'
end
local existing = record(name)
if existing then
  if existing.added_by == parent then return 'exists' end
  return 'taken'
end
if redis.call('HEXISTS', KEYS[2], name) == 1 then return 'taken' end
if tonumber(redis.call('HGET', KEYS[1], 'steps') or 0) >= tonumber(ARGV[8]) then return 'full' end
local rec = cjson.decode((record_parts(ARGV[5])))
rec.after = nil
rec.next = {}
rec.added_by = parent
for _, edge in ipairs(prec.next or {}) do
  local d, policy = edge[1], edge[2]
  local dst = get_state(d)
  if dst and dst.state == 'waiting' then
    redis.call('HINCRBY', KEYS[4], d, 1)
    rec.next[#rec.next + 1] = { d, policy }
    -- Its own copy, to change (`record` gives one shared by the records of the same text);
    -- written in two parts, whichever way it was.
    local ok, drec = pcall(cjson.decode, (record_parts(redis.call('HGET', KEYS[2], d) or '')))
    if ok and type(drec) == 'table' then
      local after = record_after(d)
      drec.after = nil
      after[#after + 1] = { name, policy }
      redis.call('HSET', KEYS[2], d, cjson.encode(drec) .. '\n' .. cjson.encode(after))
    end
  end
end
if #rec.next == 0 then rec.next = nil end
redis.call('HSET', KEYS[2], name, cjson.encode(rec) .. '\n[]')
redis.call('HSET', KEYS[5], name, ARGV[6])
put_state(name, { state = 'ready', gen = 0 })
flush()
redis.call('SADD', KEYS[6], name)
redis.call('HINCRBY', KEYS[1], 'steps', 1)
redis.call('HINCRBY', KEYS[1], 'left', 1)
return 'added'
