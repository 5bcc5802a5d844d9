-- settle.lua: steps' messages ended (acked, or dead): each step ends, and the steps that
-- waited for it become ready, or fail under a Fail edge. Idempotent: a step already ended, or
-- a message of an older gen (the flow was retried since), changes nothing.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] n   ARGV[4] how each ended, a character a step: 'd' done (acked, its value kept in
--   its topic), 'e' empty (acked, its handler returned nothing: the state's reason says so,
--   NOTHING) or 'x' dead; then n pairs of name, gen; then the reason of each dead one, in
--   their order
-- Returns { 'gone' } (no such flow), or { 'ok', { 'ok' | 'stale' for each step }, how many
-- steps it made ready, how many the outbox holds, the flow's ttl (ms, '' when unreadable),
-- the flow's end when this call ended it ('done', 'failed'; else '') }. The client sends the
-- outbox (outbox.lua) when steps were made ready.
if redis.call('EXISTS', KEYS[1]) == 0 then return { 'gone' } end
local flow = redis.call('HGET', KEYS[1], 'state')
local now = now_ms()
local answers, ended, ran, done = {}, '', false, 0
local n = tonumber(ARGV[3])
local kinds = ARGV[4]
if #kinds ~= n then error('delayq settle: ' .. #kinds .. ' ends for ' .. n .. ' steps') end
local names = {}
for i = 0, n - 1 do names[#names + 1] = ARGV[5 + 2 * i] end
prefetch(names, 1, #names)
local ended_at = string.format(' %d\n', now)
local NOTHING = 'returned nothing'
local KIND = { [100] = 'done', [101] = 'empty', [120] = 'dead' } -- 'd', 'e', 'x'
-- The pattern of a sent step's state without a reason, made once a gen.
local SENT = {}
local reasons = 5 + 2 * n
for i = 0, n - 1 do
  local name, gen = ARGV[5 + 2 * i], ARGV[6 + 2 * i]
  local kind = KIND[string.byte(kinds, i + 1)]
  local reason
  if kind == 'dead' then
    reason = ARGV[reasons]
    reasons = reasons + 1
  elseif not kind then
    error('delayq settle: an end of kind ' .. string.sub(kinds, i + 1, i + 1))
  end
  -- The usual case, a sent step done, is written without reading its state into a table.
  local raw = CACHE.state[name]
  local ok_end = kind == 'done' or kind == 'empty'
  local sent = SENT[gen]
  if not sent then
    sent = '^sent ' .. gen .. ' %d+ 0\n$'
    SENT[gen] = sent
  end
  local quick = ok_end and flow ~= 'cancelled' and raw and string.match(raw, sent)
  local st = (not quick) and get_state(name)
  gen = tonumber(gen)
  if not quick and (not st or st.gen ~= gen or FINAL[st.state]) then
    answers[#answers + 1] = 'stale'
  else
    answers[#answers + 1] = 'ok'
    -- A step ran: its flow was started, whatever became of the start's last call.
    if not ran then
      ran = true
      started(flow)
    end
    if quick or (ok_end and flow ~= 'cancelled') then
      if quick then
        -- "sent <gen> <sent> 0\n" becomes "done <gen> <sent> <now>\n<reason>".
        put_raw(name, 'done' .. string.sub(raw, 5, -4) .. ended_at .. (kind == 'empty' and NOTHING or ''))
      else
        -- A step ready, not sent yet (its sender died before it marked it), leaves the outbox.
        if st.state == 'ready' then redis.call('SREM', KEYS[6], name) end
        st.state, st.ended = 'done', now
        st.reason = kind == 'empty' and NOTHING or nil
        put_state(name, st)
      end
      done = done + 1
      local rec = record(name) or {}
      for _, edge in ipairs(rec.next or {}) do one_less(edge[1]) end
    elseif flow == 'cancelled' then
      st.state, st.ended = ok_end and 'done' or 'failed', now
      st.reason = (kind == 'empty' and NOTHING) or (not ok_end and reason) or nil
      put_state(name, st)
      redis.call('SREM', KEYS[6], name)
    else
      local failed_flow = fail(name, st, reason, now)
      if failed_flow and flow == 'running' then
        flow_ended('failed', failed_flow, now)
        flow, ended = 'failed', 'failed'
      end
    end
  end
end
apply_less()
flush()
if done > 0 then redis.call('HINCRBY', KEYS[1], 'left', -done) end
local left = tonumber(redis.call('HGET', KEYS[1], 'left'))
if flow == 'running' and ran and left and left <= 0 then
  flow_ended('done', nil, now)
  ended = 'done'
end
return { 'ok', answers, MADE_READY.n, redis.call('SCARD', KEYS[6]),
  redis.call('HGET', KEYS[1], 'ttl') or '', ended }
