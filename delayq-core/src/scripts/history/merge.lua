-- history/merge.lua (the parts a script uses prepended to record.lua and to the delay
-- queue's sweep, requeue_expired.lua): adding to a history. See record.lua for what a point
-- holds.
local HISTORY_MINUTES, HISTORY_HOURS, HISTORY_FIELDS = 1440, 720, 8

-- Adds `adds` (ok, retry, dead, timed_out, then the starts per lateness bin) to the points of
-- `minute` in the HASH `minutes` and of its hour in `hours`, and sets their backlog to
-- `backlog` (three numbers). A slot holding another stamp, or another number of fields (a
-- hand's edit, a later build's), starts afresh.
local function history_merge(minutes, hours, minute, adds, backlog)
  local function merge(key, stamp, ring)
    local slot = string.format('%d', stamp % ring)
    local p = {}
    for w in string.gmatch(redis.call('HGET', key, slot) or '', '%d+') do
      p[#p + 1] = tonumber(w)
    end
    local n = HISTORY_FIELDS + #adds - 4
    if p[1] ~= stamp or #p ~= n then
      p = { stamp }
      for i = 2, n do p[i] = 0 end
    end
    for i = 1, 4 do p[1 + i] = p[1 + i] + adds[i] end
    for i = 1, 3 do p[5 + i] = backlog[i] end
    for i = 5, #adds do p[HISTORY_FIELDS + i - 4] = p[HISTORY_FIELDS + i - 4] + adds[i] end
    for i = 1, #p do p[i] = string.format('%d', p[i]) end
    redis.call('HSET', key, slot, table.concat(p, ' '))
  end
  merge(minutes, minute, HISTORY_MINUTES)
  merge(hours, math.floor(minute / 60), HISTORY_HOURS)
end

-- A topic's backlog at `now`: waiting (hot, due in `ready`, far), due, in flight.
local function topic_backlog(delayed, ready, inflight, farinfo, now)
  local far = tonumber(redis.call('HGET', farinfo, 'count') or '0') or 0
  local r = redis.call('ZCARD', ready)
  return {
    redis.call('ZCARD', delayed) + r + far,
    redis.call('ZCOUNT', delayed, '-inf', string.format('%d', now)) + r,
    -- Below +inf: the set's SKIPLIST member is no claim (see delay/prelude.lua).
    redis.call('ZCOUNT', inflight, '-inf', '(+inf'),
  }
end

-- The lateness bins of a point (history.rs' LATENESS_BINS_MS, then the rest).
local HISTORY_BINS = 15

-- Redis' now (ms) and the minute counts are filed in: with `ended` ('1'), the minute that
-- ended 10 s before now (a runtime's minute writer runs a few seconds after it), else now's.
local function history_now(ended)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if ended == '1' then return now, math.floor((now - 10000) / 60000) end
  return now, math.floor(now / 60000)
end

-- A process's counts as sent (ok retry dead timed_out, then the starts per bin), or nil
-- when they are not that many numbers.
local function history_adds(text)
  local adds = {}
  for w in string.gmatch(text or '', '%d+') do adds[#adds + 1] = tonumber(w) end
  if #adds ~= 4 + HISTORY_BINS then return nil end
  return adds
end
