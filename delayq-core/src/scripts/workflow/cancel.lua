-- cancel.lua: stops a flow: every step not ended yet and not sent is cancelled (it never
-- runs); the steps sent are listed for the client to cancel in their topics (a message
-- running now ends as it ends, and changes nothing in the flow).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- Returns { 'cancelled' | 'ended' (it had ended: nothing changed) | 'gone', { { name, gen,
-- topic }, ... } (the steps sent: for a flow cancelled before, those that had been sent, so
-- that a cancel cut short is finished by the next) }.
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return { 'gone', {} } end
if state == 'cancelled' then
  local sent, states = {}, redis.call('HGETALL', KEYS[3])
prime_states(states)
  for i = 1, #states, 2 do
    local st = get_state(states[i])
    if st and st.state == 'cancelled' then
      sent[#sent + 1] = { states[i], st.gen, (record(states[i]) or {}).topic or '' }
    end
  end
  return { 'ended', sent }
end
if state ~= 'running' then return { 'ended', {} } end
local now = now_ms()
local sent, states = {}, redis.call('HGETALL', KEYS[3])
prime_states(states)
for i = 1, #states, 2 do
  local name = states[i]
  local st = get_state(name)
  if st and not FINAL[st.state] then
    -- Sent, or perhaps sent by a sender that died before it marked it: cancelled in its
    -- topic (nothing there, nothing changes).
    if st.state == 'sent' or st.state == 'ready' then
      local rec = record(name) or {}
      sent[#sent + 1] = { name, st.gen, rec.topic or '' }
    end
    st.state, st.ended, st.reason = 'cancelled', now, 'the flow was cancelled'
    put_state(name, st)
  end
end
flush()
redis.call('DEL', KEYS[6])
redis.call('HSET', KEYS[1], 'left', 0)
redis.call('HDEL', KEYS[1], 'starting')
flow_ended('cancelled', 'cancelled', now)
return { 'cancelled', sent }
