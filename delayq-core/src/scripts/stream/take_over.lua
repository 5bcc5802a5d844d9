-- stream/take_over.lua: a consumer's heartbeat and its share of the take-over, in one step.
--  1. The consumer is alive until now + alive_ttl; the live consumers are those whose expiry
--     has not passed.
--  2. With cleanup: expired members leave the alive set, and a consumer of the group that is
--     not alive, holds no entries and has been idle longer than alive_ttl is deleted.
--  3. Of the entries idle at least min_idle (from the cursor on, at most `count`), each goes
--     to the live consumer with the highest sha1(entry id, consumer) (rendezvous hashing:
--     the consumers split the orphans without talking, and a consumer that dies moves only
--     its own share). The entry's current holder is left out of the draw unless it is the
--     only live one: an idle entry is one its holder is not working on.
--  4. This consumer claims the entries it drew (XCLAIM with min_idle, so an entry renewed in
--     the meantime stays where it is). One that has been delivered max_deliveries times
--     already goes to the dead-letter stream instead, acked. One that is no longer in the
--     stream (trimmed by MAXLEN or deleted while pending) goes there too, with the reason
--     'trimmed' and an empty payload: it cannot run, and XCLAIM would drop it silently
--     (Redis 7) or return nil for it (6.2).
--  With count 0 (the consumer has no free slot), nothing is claimed: the step only
--  heartbeats, and reports how many of the first WANTED_PEEK idle entries it would draw.
-- KEYS, ARGV[1], ARGV[2]: as in stream/prelude.lua
-- ARGV[3] alive_ttl_ms   ARGV[4] min_idle_ms   ARGV[5] count   ARGV[6] max_deliveries
-- ARGV[7] cursor ('-' or the last entry id seen)   ARGV[8] cleanup (1 or 0)
-- ARGV[9] dead_max   ARGV[10] dead_ttl ms (the dead-letter stream is trimmed to them after a
-- step that buried an entry, and at each cleanup, see trim_dead)
-- Returns { next cursor ('-' when the scan reached the end), claimed, buried, trimmed, wanted,
-- dead letters dropped }
-- where claimed is a list of { id, fields, deliveries }, buried and trimmed lists of entry
-- ids sent to the dead-letter stream, and wanted (count 0 only) how many idle entries this
-- consumer would take with a free slot.
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local ttl, min_idle, count = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local max_deliveries, cursor = tonumber(ARGV[6]), ARGV[7]
local now = now_ms()
redis.call('ZADD', KEYS[3], now + ttl, me)
local live = redis.call('ZRANGEBYSCORE', KEYS[3], now, '+inf')
local dropped = 0
if ARGV[8] == '1' then
  dropped = trim_dead(KEYS[2], group, ARGV[9], ARGV[10])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. now)
  local is_live = {}
  for _, c in ipairs(live) do
    is_live[c] = true
  end
  for _, info in ipairs(redis.call('XINFO', 'CONSUMERS', stream, group)) do
    local name = field(info, 'name')
    local pending = tonumber(field(info, 'pending'))
    local idle = tonumber(field(info, 'idle'))
    if not is_live[name] and pending == 0 and idle > ttl then
      redis.call('XGROUP', 'DELCONSUMER', stream, group, name)
    end
  end
end

-- The live consumer that draws entry `id` now held by `holder`.
local function drawn_by(id, holder)
  local best, best_hash = nil, nil
  for _, c in ipairs(live) do
    if c ~= holder or #live == 1 then
      local h = redis.sha1hex(id .. '\0' .. c)
      if not best_hash or h > best_hash then
        best, best_hash = c, h
      end
    end
  end
  return best
end

if count == 0 then
  local WANTED_PEEK = 16
  local wanted = 0
  for _, e in ipairs(redis.call('XPENDING', stream, group, 'IDLE', min_idle, '-', '+', WANTED_PEEK)) do
    if drawn_by(e[1], e[2]) == me then
      wanted = wanted + 1
    end
  end
  return { '-', {}, {}, {}, wanted, dropped }
end

local start = '-'
if cursor ~= '-' then
  start = '(' .. cursor
end
local idle = redis.call('XPENDING', stream, group, 'IDLE', min_idle, start, '+', count)
local next_cursor = '-'
if #idle == count then
  next_cursor = idle[#idle][1]
end

local mine, deliveries, buried, trimmed = {}, {}, {}, {}
for _, e in ipairs(idle) do
  local id = e[1]
  if drawn_by(id, e[2]) == me then
    if #redis.call('XRANGE', stream, id, id) == 0 then
      bury(stream, KEYS[2], group, id, e[4], 'trimmed')
      trimmed[#trimmed + 1] = id
    elseif tonumber(e[4]) >= max_deliveries then
      bury(stream, KEYS[2], group, id, e[4], 'max_deliveries reached')
      buried[#buried + 1] = id
    else
      mine[#mine + 1] = id
      deliveries[id] = tonumber(e[4]) + 1
    end
  end
end

local claimed = {}
if #mine > 0 then
  for _, entry in ipairs(redis.call('XCLAIM', stream, group, me, min_idle, unpack(mine))) do
    -- Every id was just found in the stream, so each comes back; the check only keeps a nil
    -- (6.2's answer for a missing entry) from failing the script after earlier writes.
    if entry then
      claimed[#claimed + 1] = { entry[1], entry[2], deliveries[entry[1]] }
    end
  end
end
if #buried + #trimmed > 0 then dropped = dropped + trim_dead(KEYS[2], group, ARGV[9], ARGV[10]) end
return { next_cursor, claimed, buried, trimmed, 0, dropped }
