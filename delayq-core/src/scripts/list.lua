-- list.lua: read a page of one state's messages, earliest score first (for dead letters,
-- `delayq peek` and `delayq dead show`).
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] state: 'delayed' or 'dead'
-- ARGV[4] 'range': ARGV[5] start index, ARGV[6] stop index (inclusive)
--         'id':    ARGV[5] the one id to read
-- Returns { id1, score1, envelope1 or false, ... } (scores: the due time or the time it
-- died, in ms).
local set = ({ delayed = KEYS[1], dead = KEYS[4] })[ARGV[3]]
if not set then return redis.error_reply('unknown state ' .. ARGV[3]) end
local page
if ARGV[4] == 'id' then
  local score = redis.call('ZSCORE', set, ARGV[5])
  page = score and { ARGV[5], score } or {}
else
  page = redis.call('ZRANGE', set, tonumber(ARGV[5]), tonumber(ARGV[6]), 'WITHSCORES')
end
local out = {}
for i = 1, #page, 2 do
  out[#out + 1] = page[i]
  out[#out + 1] = page[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[3], page[i])
end
return out
