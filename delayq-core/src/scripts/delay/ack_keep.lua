-- ack_keep.lua: acks deliveries whose handlers returned a value, and keeps each value as the
-- message's result (see "Ends" in prelude.lua), in one step: a result is never kept for a
-- message that is not acked, nor an ack done without its result.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] result_ttl (ms)   ARGV[4] results_max (the most kept in the topic, the oldest
--   dropped first)   ARGV[5] n, then n groups of id, delivery token, `dedup_for` window (ms,
--   0 for none), value (JSON)
-- Returns a string of one character per id, in their order: '1' acked, '0' stale (that
-- delivery no longer owns the message; its value is not kept).
local now = now_ms()
local ttl, max, n = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local out, done, values, reserved, nd = {}, {}, {}, {}, 0
for i = 1, n do
  local at = 2 + 4 * i
  local id, token, window, value = ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2]), ARGV[at + 3]
  if owned_raw(id, token) then
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id, token_field(id))
    keep_result(id, 'done', value, now, ttl)
    step_ended(id, now, true)
    nd = nd + 1
    done[nd], values[nd] = id, value
    if window and window > 0 then
      reserved[#reserved + 1] = window
      reserved[#reserved + 1] = id
    end
    out[i] = '1'
  else
    out[i] = '0'
  end
end
if nd > 0 then
  announce_ends(done, 1, nd, 'done', values)
  count('ok', nd, now)
  reserve(reserved, now)
  trim_results(now, max, ttl)
end
return table.concat(out)
