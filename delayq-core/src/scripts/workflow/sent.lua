-- sent.lua: steps were sent to their topics (their messages are there, or were, under their
-- ids): they leave the outbox. A flow being started is kept for good from now on.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] n, then n pairs of name, gen
-- Returns how many were marked sent.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local now = now_ms()
if redis.call('HGET', KEYS[1], 'starting') then
  redis.call('HDEL', KEYS[1], 'starting')
  if redis.call('HGET', KEYS[1], 'state') == 'running' then keep_for(nil) end
end
local marked = 0
for i = 0, tonumber(ARGV[3]) - 1 do
  local name, gen = ARGV[4 + 2 * i], tonumber(ARGV[5 + 2 * i])
  local st = get_state(name)
  if st and st.state == 'ready' and st.gen == gen then
    st.state, st.sent = 'sent', now
    put_state(name, st)
    redis.call('SREM', KEYS[6], name)
    marked = marked + 1
  end
end
return marked
