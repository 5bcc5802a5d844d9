-- outcome.lua: how messages stand, and, when asked, a wait registered for each that has not
-- ended (see "Ends" in prelude.lua). A producer subscribes to the topic's end channel before
-- it calls this, so an end after this call is heard, and one before it is answered here.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far buckets the ids may be in)
-- ARGV[3] how long to wait (ms from now; 0: only read)   ARGV[4] '1': register the wait for
--   an id not sent yet too (`send_and_wait` registers before it sends), else '0'
-- then the ids
-- Returns one string per id, in their order: 'pending' (delayed, hot or far, or in flight),
-- 'done\n<value>' (its kept result, 'null' for none), 'cancelled', 'dead\n<reason>' or
-- 'unknown' (never sent, ended without a kept outcome, or kept past result_ttl).
local wait_ms = tonumber(ARGV[3]) or 0
for i = 5, #ARGV do need_lookup(ARGV[i], id_time(ARGV[i]), false) end
local missing = missing_buckets()
if missing then return missing end
local now = now_ms()
local out, waiting = {}, {}
local ahead = ARGV[4] == '1'
for i = 5, #ARGV do
  local id = ARGV[i]
  local answer
  if redis.call('ZSCORE', KEYS[2], id) or redis.call('ZSCORE', KEYS[1], id)
    or redis.call('ZSCORE', KEYS[12], id) or far_bucket(id, id_time(id)) then
    answer = 'pending'
  elseif redis.call('ZSCORE', KEYS[4], id) then
    local m = decode(redis.call('HGET', KEYS[3], id))
    answer = 'dead\n' .. ((m and m.dead_reason) or '')
  else
    local record = redis.call('HGET', KEYS[16], id)
    local kind, until_ms, body = nil, nil, nil
    if type(record) == 'string' then
      kind, until_ms, body = string.match(record, '^(%a+) (%d+)\n(.*)$')
    end
    if (kind == 'done' or kind == 'cancelled') and tonumber(until_ms) > now then
      answer = kind .. '\n' .. body
    else
      answer = 'unknown'
    end
  end
  if wait_ms > 0 and (answer == 'pending' or (ahead and answer == 'unknown')) then
    waiting[#waiting + 1] = string.format('%d', math.min(now + wait_ms, MAX_DUE_MS))
    waiting[#waiting + 1] = id
  end
  out[#out + 1] = answer
end
if #waiting > 0 then
  redis.call('ZADD', KEYS[15], 'GT', unpack(waiting))
end
if wait_ms > 0 then unwait_expired(now) end
return out
