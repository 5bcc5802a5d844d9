-- dead_list.lua: read a page of dead letters, oldest first.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] start index   ARGV[4] stop index (inclusive)
-- Returns { id1, died_ms1, envelope1 or false, ... }.
local page = redis.call('ZRANGE', KEYS[4], tonumber(ARGV[3]), tonumber(ARGV[4]), 'WITHSCORES')
local out = {}
for i = 1, #page, 2 do
  out[#out + 1] = page[i]
  out[#out + 1] = page[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[3], page[i])
end
return out
