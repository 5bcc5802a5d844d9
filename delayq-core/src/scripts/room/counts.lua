-- room/counts.lua: how many wait and how many are inside (unexpired).
-- KEYS: as in room/prelude.lua
-- Returns { waiting, active }.
local now = now_ms()
local waiting = redis.call('ZCOUNT', KEYS[1], '(' .. admitted_upto(), '+inf')
local active = 0
for _, t in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  local last, expiry = string.match(t, '^(%d+):(%d+)$')
  if tonumber(expiry) > now then
    active = active + tonumber(redis.call('HGET', KEYS[9], last) or 0)
  end
end
return { waiting, active }
