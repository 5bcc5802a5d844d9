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
local ARGV = ARGV -- a local: read for every message
-- The tokens kept beside the envelopes (see `token_field`), read in one HMGET; the writes of
-- all the acked go in one command each (as `ack_receipts` does), not a few a message.
local fields = {}
for i = 1, n do fields[i] = ARGV[2 + 4 * i] .. '\n' end
local held = redis.call('HMGET', KEYS[3], unpack(fields))
local out, done, values, gone, kept, by, notes, reserved, nd = {}, {}, {}, {}, {}, {}, {}, {}, 0
local seen = {}
local at_ms = string.format('%d', now)
local kept_head = string.format('done %d\n', math.min(now + ttl, MAX_DUE_MS))
for i = 1, n do
  local at = 2 + 4 * i
  local id, token, window, value = ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2]), ARGV[at + 3]
  local h, ok = held[i], false
  if seen[id] then
    -- Given twice: the first copy acks, the second is stale (as if it came after).
    ok = false
  elseif h then
    ok = h == token
  else
    -- No token beside it: not in flight (stale), or claimed by an earlier build.
    ok = owned_raw(id, token) ~= nil
  end
  if ok then
    seen[id] = true
    nd = nd + 1
    done[nd], values[nd] = id, value
    gone[#gone + 1] = id
    if h then gone[#gone + 1] = fields[i] end
    kept[#kept + 1] = id
    kept[#kept + 1] = kept_head .. value
    by[#by + 1] = at_ms
    by[#by + 1] = id
    -- A flow step's (see `step_ended`), scored half a ms on: it kept a value (a plain ack's
    -- note, a whole ms, is of a handler that returned none).
    if string.find(id, '\31', 1, true) then
      notes[#notes + 1] = at_ms .. '.5'
      notes[#notes + 1] = id
    end
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
  redis.call('ZREM', KEYS[2], unpack(done))
  redis.call('HDEL', KEYS[3], unpack(gone))
  redis.call('HSET', KEYS[16], unpack(kept))
  redis.call('ZADD', KEYS[17], unpack(by))
  if #notes > 0 then redis.call('ZADD', KEYS[18], unpack(notes)) end
  announce_ends(done, 1, nd, 'done', values)
  count('ok', nd, now)
  reserve(reserved, now)
  trim_results(now, max, ttl)
end
return table.concat(out)
