-- dead_list.lua: read a page of dead letters, oldest first.
-- KEYS[1] dead   KEYS[2] msg
-- ARGV[1] start index   ARGV[2] stop index (inclusive)
-- Returns { id1, died_ms1, envelope1 or false, ... }.
local page = redis.call('ZRANGE', KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), 'WITHSCORES')
local out = {}
for i = 1, #page, 2 do
  out[#out + 1] = page[i]
  out[#out + 1] = page[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], page[i])
end
return out
