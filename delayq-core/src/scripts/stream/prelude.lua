-- stream/prelude.lua: shared by the stream scripts (prepended when a script is loaded).
--
-- Every stream script takes the keys of one stream, in this order:
--   KEYS[1] the stream (the user's key, e.g. orders.v1)
--   KEYS[2] its dead-letter stream {<stream>}:dead
--   KEYS[3] the group's alive set {<stream>}:alive:<group> (ZSET consumer -> expiry, ms)
-- The braces make all three hash to the stream's slot on a cluster. ARGV[1] is the group,
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

-- Dead letters past the group's bounds go, oldest first: the dead-letter stream keeps at most
-- `max` entries (the stream's, shared by its groups), each for `ttl_ms` (entry ids carry the
-- time they were written). Returns how many went; nothing when the bounds are not given.
local function trim_dead(dead, max, ttl_ms)
  max, ttl_ms = tonumber(max), tonumber(ttl_ms)
  if not max or not ttl_ms then return 0 end
  local n = redis.call('XTRIM', dead, 'MAXLEN', '=', max)
  local cutoff = now_ms() - ttl_ms
  if cutoff > 0 then
    n = n + redis.call('XTRIM', dead, 'MINID', '=', string.format('%d', cutoff))
  end
  return n
end
