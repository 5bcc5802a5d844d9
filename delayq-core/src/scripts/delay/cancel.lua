-- cancel.lua: remove a message that has not started.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (and far.lua: the far buckets the id may be in)
-- ARGV[3] id
-- Returns 'removed' (it was delayed, hot or far), 'inflight' (claimed right now; left alone)
-- or 'notfound' (unknown, already done, or dead: dead letters go through purge_dead).
-- A removed message ends cancelled: a topic whose listener keeps results (the runtime
-- announces `results`, "<result_ttl ms> <results_max>", in KEYS[9]) keeps that outcome, and
-- its waits hear it (see "Ends" in prelude.lua).
local id = ARGV[3]
local function removed()
  local kept = redis.call('HGET', KEYS[9], 'results')
  local ttl, max = string.match(kept or '', '^(%d+) (%d+)$')
  if ttl then
    local now = now_ms()
    keep_result(id, 'cancelled', '', now, tonumber(ttl))
    trim_results(now, tonumber(max), tonumber(ttl))
  end
  step_ended(id, now_ms(), false)
  announce_ends({ id }, 1, 1, 'cancelled', '')
  return 'removed'
end
local t = id_time(id)
need_lookup(id, t, false)
local missing = missing_buckets()
if missing then return missing end
if redis.call('ZSCORE', KEYS[2], id) then return 'inflight' end
if redis.call('ZREM', KEYS[1], id) == 1 or redis.call('ZREM', KEYS[12], id) == 1 then
  redis.call('HDEL', KEYS[3], id)
  redis.call('HDEL', KEYS[14], id)
  return removed()
end
local b = far_bucket(id, t)
if b then
  far_remove(id, b, t, nil)
  far_flush()
  return removed()
end
return 'notfound'
