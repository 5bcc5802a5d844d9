-- settle.lua: a step's message ended (acked, or dead): the step ends, and the steps that
-- waited for it become ready, or fail under a Fail edge. Idempotent: a step already ended, or
-- a message of an older gen (the flow was retried since), changes nothing.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] step name   ARGV[4] gen   ARGV[5] 'done' or 'dead'   ARGV[6] reason (dead)
-- Returns { 'ok' | 'stale' | 'gone' (no such flow), {} (the client reads the outbox next,
-- outbox.lua), the flow's end when this call ended it ('done', 'failed'; else '') }.
if redis.call('EXISTS', KEYS[1]) == 0 then return { 'gone', {} } end
local name, gen, kind = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local st = get_state(name)
local flow = redis.call('HGET', KEYS[1], 'state')
if not st or st.gen ~= gen or FINAL[st.state] then
  return { 'stale', {} }
end
local now = now_ms()
-- A step ran: its flow was started, whatever became of the start's last call.
if redis.call('HGET', KEYS[1], 'starting') then
  redis.call('HDEL', KEYS[1], 'starting')
  if flow == 'running' then keep_for(nil) end
end
if flow == 'cancelled' then
  st.state, st.ended = (kind == 'done') and 'done' or 'failed', now
  if kind ~= 'done' then st.reason = ARGV[6] end
  put_state(name, st)
  redis.call('SREM', KEYS[6], name)
  return { 'ok', {} }
end
local failed_flow = nil
if kind == 'done' then
  st.state, st.ended = 'done', now
  put_state(name, st)
  redis.call('SREM', KEYS[6], name)
  redis.call('HINCRBY', KEYS[1], 'left', -1)
  local rec = record(name) or {}
  for _, edge in ipairs(rec.next or {}) do one_less(edge[1]) end
else
  failed_flow = fail(name, st, ARGV[6], now)
end
local ended = ''
if failed_flow and flow == 'running' then
  flow_ended('failed', failed_flow, now)
  ended = 'failed'
elseif tonumber(redis.call('HGET', KEYS[1], 'left')) <= 0 and flow == 'running' then
  flow_ended('done', nil, now)
  ended = 'done'
end
return { 'ok', {}, ended }
