-- room/prelude.lua: shared by the waiting-room scripts (the parts a script uses are
-- prepended when it is loaded).
--
-- Every room script takes the keys of one room (ns, room r; the hash tag {room:r} keeps them
-- on one cluster slot), in this order:
--   KEYS[1] line      ZSET token -> arrival number (from `seq`: strictly increasing): every
--                     token waiting, and every admitted one whose admission has not ended
--   KEYS[2] touched   ZSET "<arrival>:<token>" -> last enter/touch (ms); a waiting token
--                     untouched for waiting_ttl expires. It may still hold the records of
--                     tokens admitted since: they are dropped when their time comes, never
--                     counted as expired. The arrival in the record tells the sweep which
--                     is which without a lookup.
--   KEYS[3] ticks     ZSET "<last arrival>:<expiry ms>" -> last arrival: one member per tick
--                     that admitted someone: it admitted the arrivals after the previous
--                     tick's last, up to its own, until its expiry
--   KEYS[4] seq       STRING arrival counter
--   KEYS[5] admits    ZSET "<ms>:<n>" -> ms: what each tick of the last minute admitted
--   KEYS[6] lease     STRING the room's ticking lease ("<owner> <token>"), for fenced ticks
--   KEYS[7] rate      STRING admissions per second over the last minute of ticks (set by
--                     each tick, read by status)
--   KEYS[8] admitted  STRING the last arrival number admitted (0 before the first tick)
--   KEYS[9] inside    HASH a tick's last arrival -> how many of its admissions are still on
--                     (completes and leaves take theirs off)
-- So a tick admits by moving `admitted` up the line: O(log n), however many it lets in, and
-- nothing is written per token. A token's state follows from its arrival number: above
-- `admitted`, it waits; at or below, it is inside until its tick's expiry. It can never be
-- both or neither. Times are the Redis server's, in ms.
--
-- Line numbers: this prelude is prepended to each script, so a Lua error in a script reports
-- a line number this file's line count higher than the line in the script's own file.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The last arrival number admitted so far.
local function admitted_upto()
  return tonumber(redis.call('GET', KEYS[8]) or 0)
end

-- The tick that admitted arrival `arrival`: its last arrival and expiry, or nil.
local function tick_of(arrival)
  local t = redis.call('ZRANGE', KEYS[3], arrival, '+inf', 'BYSCORE', 'LIMIT', 0, 1)
  if not t[1] then return nil end
  local last, expiry = string.match(t[1], '^(%d+):(%d+)$')
  return tonumber(last), tonumber(expiry), t[1]
end

-- A token's record in `touched`.
local function record(arrival, token)
  return string.format('%d:%s', arrival, token)
end

-- Where a token stands: { state = 'waiting', arrival, upto } or { state = 'active', arrival,
-- last (its tick's last arrival), expiry }, or nil (unknown or expired).
local function state_of(token, now, waiting_ttl)
  local arrival = redis.call('ZSCORE', KEYS[1], token)
  if not arrival then return nil end
  arrival = tonumber(arrival)
  local upto = admitted_upto()
  if arrival > upto then
    local touched = tonumber(redis.call('ZSCORE', KEYS[2], record(arrival, token)) or 0)
    if touched + waiting_ttl < now then return nil end
    return { state = 'waiting', arrival = arrival, upto = upto }
  end
  local last, expiry = tick_of(arrival)
  if last and expiry > now then
    return { state = 'active', arrival = arrival, last = last, expiry = expiry }
  end
  return nil
end
