-- sent.lua: steps were sent to their topics (their messages are there, or were, under their
-- ids): they leave the outbox. A flow being started is kept for good from now on.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] n, then n pairs of name, gen
-- Returns the { name, gen } of those it could not mark because they were cancelled, or run
-- again by retry_flow (a newer gen), since they were read: the client cancels their messages.
-- (One that already ended, done or failed, is left alone: it ran.)
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local now = now_ms()
started(redis.call('HGET', KEYS[1], 'state'))
local stale, names, gone = {}, {}, {}
local n = tonumber(ARGV[3])
for i = 0, n - 1 do names[#names + 1] = ARGV[4 + 2 * i] end
prefetch(names, 1, #names, true)
local sent_at = string.format(' %d 0\n', now)
for i = 0, n - 1 do
  local name, gen = ARGV[4 + 2 * i], ARGV[5 + 2 * i]
  -- A step ready to be sent, not ended, without a reason (as create.lua, retry.lua and
  -- `apply_less` leave it): written without reading it into a table.
  if CACHE.state[name] == 'ready ' .. gen .. ' 0 0\n' then
    put_raw(name, 'sent ' .. gen .. sent_at)
    gone[#gone + 1] = name
  else
    local st = get_state(name)
    gen = tonumber(gen)
    if st and st.state == 'ready' and st.gen == gen then
      st.state, st.sent = 'sent', now
      put_state(name, st)
      gone[#gone + 1] = name
    elseif st and (st.gen ~= gen or st.state == 'cancelled') then
      stale[#stale + 1] = { name, gen }
    end
  end
end
flush()
if #gone > 0 then redis.call('SREM', KEYS[6], unpack(gone)) end
return stale
