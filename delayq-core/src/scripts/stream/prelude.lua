-- stream/prelude.lua: shared by the stream scripts (the parts a script uses are
-- prepended when it is loaded).
--
-- Every stream script takes the keys of one stream, in this order:
--   KEYS[1] the stream (the user's key, e.g. orders.v1)
--   KEYS[2] its dead-letter stream {<stream>}:dead
--   KEYS[3] the group's alive set {<stream>}:alive:<group> (ZSET consumer -> expiry, ms)
--   KEYS[4] the dead letters' bounds {<stream>}:dead:bounds (see trim_dead)
-- The braces make all four hash to the stream's slot on a cluster. ARGV[1] is the group,
-- ARGV[2] the consumer this call acts for; each script's own arguments follow from ARGV[3].
--
-- Line numbers: this prelude is prepended to each script, so a Lua error in a script reports
-- a line number this file's line count higher than the line in the script's own file.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The delivery count of `id` when `consumer` holds it in the group's pending list, else nil
-- (acked, dead-lettered, or taken over by another consumer).
local function held_by(stream, group, consumer, id)
  local p = redis.call('XPENDING', stream, group, id, id, 1, consumer)
  if #p == 0 then
    return nil
  end
  return tonumber(p[1][4])
end

-- The value of field `name` in a flat field list, or nil.
local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then
      return fields[i + 1]
    end
  end
  return nil
end

-- Writes entry `id` of the stream to the dead-letter stream and acks it, in one step.
local function bury(stream, dead, group, id, deliveries, reason)
  local entry = redis.call('XRANGE', stream, id, id)
  local payload = ''
  if #entry == 1 then
    payload = field(entry[1][2], 'payload') or ''
  end
  redis.call('XADD', dead, '*', 'id', id, 'group', group, 'deliveries', deliveries,
    'reason', reason, 'payload', payload)
  redis.call('XACK', stream, group, id)
end

-- Dead letters past the bounds go, oldest first. The dead-letter stream is the stream's,
-- shared by its groups, so it keeps what the loosest group's bounds keep: each group records
-- its own `<max> <ttl ms>` in KEYS[4] (a group that left keeps its record: the error is on the
-- side of keeping). At most DEAD_DROP_PER_CALL go by count in one call, and by age whole
-- stream nodes (approximate trimming, bounded too), so a large backlog after an upgrade is
-- trimmed over a few calls instead of blocking Redis. The number dropped is counted in
-- KEYS[4]'s `dropped`; returns it. Nothing happens when the bounds are not given.
local DEAD_DROP_PER_CALL = 1000
local function trim_dead(dead, group, max, ttl_ms)
  max, ttl_ms = tonumber(max), tonumber(ttl_ms)
  if not max or not ttl_ms then return 0 end
  redis.call('HSET', KEYS[4], group, string.format('%d %d', max, ttl_ms))
  for _, v in ipairs(redis.call('HVALS', KEYS[4])) do
    local m, t = string.match(v, '^(%d+) (%d+)$')
    if m then
      max, ttl_ms = math.max(max, tonumber(m)), math.max(ttl_ms, tonumber(t))
    end
  end
  local n = 0
  local len = redis.call('XLEN', dead)
  if len > max then
    local keep = len - math.min(len - max, DEAD_DROP_PER_CALL)
    n = redis.call('XTRIM', dead, 'MAXLEN', '=', keep)
  end
  local cutoff = now_ms() - ttl_ms
  if cutoff > 0 then
    n = n + redis.call('XTRIM', dead, 'MINID', '~', string.format('%d', cutoff),
      'LIMIT', DEAD_DROP_PER_CALL)
  end
  if n > 0 then redis.call('HINCRBY', KEYS[4], 'dropped', n) end
  return n
end
