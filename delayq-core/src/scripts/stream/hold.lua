-- stream/hold.lua: for entries this consumer holds, sets how long they have been idle, which
-- decides when another consumer may take them over (once idle for min_idle).
--   renew (a running handler, Ack::extend): idle 0, the full min_idle from now;
--   nack: idle min_idle - backoff, so it is taken over (delivered again) after the backoff;
--   hand back (shutdown): idle min_idle and one delivery less, so it is taken over at once
--   without using up a delivery.
-- KEYS, ARGV[1], ARGV[2]: as in stream/prelude.lua
-- ARGV[3] idle_ms   ARGV[4] delivery count change (0 or -1)   from ARGV[5]: entry ids
-- Returns one integer per id: 1 done, 0 stale (this consumer no longer holds it).
local idle, change = ARGV[3], tonumber(ARGV[4])
local out = {}
for i = 5, #ARGV do
  local id = ARGV[i]
  local deliveries = held_by(KEYS[1], ARGV[1], ARGV[2], id)
  if deliveries then
    local count = math.max(deliveries + change, 0)
    local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, id,
      'IDLE', idle, 'RETRYCOUNT', count, 'JUSTID')
    out[#out + 1] = #claimed
  else
    out[#out + 1] = 0
  end
end
return out
