-- retry.lua: runs the failed and cancelled steps of a flow again, and every step downstream
-- of them (their next gen: a message of an older gen that still ends changes nothing); the
-- steps that succeeded upstream keep their results and do not run again.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- Returns { 'retried' | 'nothing' (no step failed or was cancelled) | 'gone', how many steps
-- run again, { { name, gen, topic }, ... } (messages of older gens still pending: the client
-- cancels them) }.
if redis.call('EXISTS', KEYS[1]) == 0 then return { 'gone', 0, {} } end
local states = redis.call('HGETALL', KEYS[3])
prime_states(states)
local again, order = {}, {}
for i = 1, #states, 2 do
  local st = get_state(states[i])
  if st and (st.state == 'failed' or st.state == 'cancelled') then
    again[states[i]] = true
    order[#order + 1] = states[i]
  end
end
if #order == 0 then return { 'nothing', 0, {} } end
-- Everything downstream.
local i = 1
while i <= #order do
  local rec = record(order[i]) or {}
  for _, edge in ipairs(rec.next or {}) do
    if not again[edge[1]] then
      again[edge[1]] = true
      order[#order + 1] = edge[1]
    end
  end
  i = i + 1
end
local stale = {}
for _, name in ipairs(order) do
  local st = get_state(name) or { gen = 0 }
  -- A message of the older gen may be in its topic (sent, or sent by a sender that died
  -- before it marked it): cancelled.
  if st.state == 'sent' or st.state == 'ready' then
    stale[#stale + 1] = { name, st.gen, (record(name) or {}).topic or '' }
  end
  redis.call('SREM', KEYS[6], name)
  local waiting = 0
  for _, dep in ipairs(record_after(name)) do
    local dst = get_state(dep[1])
    if again[dep[1]] or not dst or dst.state ~= 'done' then waiting = waiting + 1 end
  end
  local next = { state = 'waiting', gen = st.gen + 1 }
  if waiting == 0 then
    next.state = 'ready'
    redis.call('SADD', KEYS[6], name)
  end
  redis.call('HSET', KEYS[4], name, waiting)
  put_state(name, next)
end
flush()
local left = 0
for j = 1, #states, 2 do
  local st = get_state(states[j])
  if st and not FINAL[st.state] then left = left + 1 end
end
redis.call('HSET', KEYS[1], 'state', 'running', 'left', left)
redis.call('HDEL', KEYS[1], 'ended', 'reason')
keep_for(nil)
return { 'retried', #order, stale }
