-- list.lua: read a page of one state's messages, earliest score first (for dead letters,
-- `delayq peek` and `delayq dead show`).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] state: 'delayed' or 'dead'
-- ARGV[4] 'range': ARGV[5] start index, ARGV[6] stop index (inclusive)
--         'id':    ARGV[5] the one id to read
-- Returns { id1, score1, envelope1 or false, ... } (scores: the due time or the time it
-- died, in ms). Delayed messages are listed from the hot keys first, then bucket by bucket
-- from the far buckets (a bucket read whole and sorted by due time: peeking deep into a far
-- bucket of many messages is a heavy call).
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
  local score = redis.call('ZSCORE', set, id)
  if score then
    add(id, score, redis.call('HGET', KEYS[3], id))
  elseif set == KEYS[1] then
    local b = far_bucket(id, id_time(id))
    local m = b and far_decode(redis.call('HGET', far_key(b), id), b)
    if m then add(id, string.format('%d', m.due_ms), encode(m)) end
  end
  return out
end
local start, stop = tonumber(ARGV[5]), tonumber(ARGV[6])
local page = redis.call('ZRANGE', set, start, stop, 'WITHSCORES')
for i = 1, #page, 2 do
  add(page[i], page[i + 1], redis.call('HGET', KEYS[3], page[i]))
end
if set ~= KEYS[1] then return out end
-- Past the hot keys: skip whole far buckets by their size, then read the ones the page reaches.
local skip = math.max(0, start - redis.call('ZCARD', KEYS[1]))
local want = stop - start + 1 - #page / 2
for _, member in ipairs(redis.call('ZRANGE', KEYS[7], 0, -1)) do
  if want <= 0 then break end
  local b = tonumber(member)
  local key = far_key(b)
  local size = redis.call('HLEN', key)
  if skip >= size then
    skip = skip - size
  else
    local flat = redis.call('HGETALL', key)
    local held = {}
    for i = 1, #flat, 2 do
      local m = far_decode(flat[i + 1], b)
      held[#held + 1] = { id = flat[i], m = m, due = m and m.due_ms or 0 }
    end
    table.sort(held, function(x, y) return x.due < y.due end)
    for i = skip + 1, #held do
      if want <= 0 then break end
      local h = held[i]
      add(h.id, string.format('%d', h.due), h.m and encode(h.m) or false)
      want = want - 1
    end
    skip = 0
  end
end
return out
