-- list.lua: read a page of one state's messages, earliest score first (for dead letters,
-- `delayq peek` and `delayq dead show`).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far buckets it reads)
-- ARGV[3] state: 'delayed' or 'dead'
-- ARGV[4] 'range': ARGV[5] start index, ARGV[6] stop index (inclusive), of the sorted set
--                  (for 'delayed': the hot messages only, those due in `ready` first, see
--                  "Priorities" in prelude.lua, then those of `delayed`)
--         'id':    ARGV[5] the one id to read (hot or far)
--         'far':   ARGV[5] a far bucket number, ARGV[6] an HSCAN cursor ('0' to start),
--                  ARGV[7] COUNT: one bounded step through that bucket, in no order
-- Returns { id1, score1, envelope1 or false, ... } (scores: the due time or the time it
-- died, in ms); for 'far', the next cursor ('0' at the end) comes first. Every call reads a
-- bounded number of elements: the client walks far buckets step by step and orders what it
-- finds (Producer::peek), so that peeking never holds Redis for a whole bucket.
local set = ({ delayed = KEYS[1], dead = KEYS[4] })[ARGV[3]]
if not set then return redis.error_reply('unknown state ' .. ARGV[3]) end
local out = {}
local function add(id, score, envelope)
  out[#out + 1] = id
  out[#out + 1] = score
  out[#out + 1] = envelope
end
if ARGV[4] == 'id' then
  local id = ARGV[5]
  if set == KEYS[1] then need_lookup(id, id_time(id), false) end
  local missing = missing_buckets()
  if missing then return missing end
  local score = redis.call('ZSCORE', set, id)
  if not score and set == KEYS[1] then
    score = redis.call('ZSCORE', KEYS[12], id)
    if score then score = string.format('%d', ready_due(score)) end
  end
  if score then
    add(id, score, redis.call('HGET', KEYS[3], id))
  elseif set == KEYS[1] then
    local b = far_bucket(id, id_time(id))
    local m = b and far_decode(redis.call('HGET', far_key(b), id), b)
    if m then add(id, string.format('%d', m.due_ms), encode(m)) end
  end
  return out
end
if ARGV[4] == 'far' then
  -- One HSCAN step over far bucket ARGV[5]: a bounded read, however large the bucket.
  local b = tonumber(ARGV[5])
  need(b)
  local missing = missing_buckets()
  if missing then return missing end
  local r = redis.call('HSCAN', far_key(b), ARGV[6], 'COUNT', tonumber(ARGV[7]))
  out[1] = r[1]
  local flat = r[2]
  for i = 1, #flat, 2 do
    local m = far_decode(flat[i + 1], b)
    add(flat[i], string.format('%d', m and m.due_ms or 0), m and encode(m) or false)
  end
  return out
end
local start, stop = tonumber(ARGV[5]), tonumber(ARGV[6])
if set == KEYS[1] then
  local ready = redis.call('ZCARD', KEYS[12])
  if start < ready then
    local page = redis.call('ZRANGE', KEYS[12], start, math.min(stop, ready - 1), 'WITHSCORES')
    for i = 1, #page, 2 do
      add(page[i], string.format('%d', ready_due(page[i + 1])),
        redis.call('HGET', KEYS[3], page[i]))
    end
  end
  start, stop = math.max(start - ready, 0), stop - ready
  if stop < 0 then return out end
end
local page = redis.call('ZRANGE', set, start, stop, 'WITHSCORES')
for i = 1, #page, 2 do
  add(page[i], page[i + 1], redis.call('HGET', KEYS[3], page[i]))
end
return out
