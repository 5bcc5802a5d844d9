-- requeue_expired.lua: deliveries whose ack deadline passed go back to `delayed`, due now, or
-- to `dead` when they have used max_attempts.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua (no far bucket); KEYS[19], KEYS[20] the topic's
--   history (minutes, hours: history/merge.lua is prepended), where the topic's backlog is
--   sampled into the current minute: the back pool sweeps each topic every two minutes at
--   most, so a topic nothing happens on has its backlog charted too, at no call of its own
-- ARGV[3] max count   ARGV[4] default max_attempts   ARGV[5] dead_max   ARGV[6] dead_ttl ms
-- ARGV[7] results_max   ARGV[8] result_ttl ms (kept results past these are dropped)
-- (dead letters past these bounds are dropped, see trim_dead)
-- Returns { requeued, dead, next deadline ms or -1, now ms, dead letters dropped }.
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
local requeued, dead = 0, 0
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[2], id)
  local got = redis.call('HMGET', KEYS[3], id, token_field(id))
  local raw = got[1]
  local m = decode(raw)
  -- The claim that ran out counts its attempt (see `owned`).
  if got[2] then
    claim_ended(id)
    if m then as_claimed(m, got[2]) end
  end
  if m then
    local max = attempts_allowed(m, ARGV[4])
    m.last_error = 'ack deadline passed'
    if m.attempt >= max then
      bury(id, m,
        string.format('ack deadline passed on attempt %d of max_attempts %d', m.attempt, max), now)
      dead = dead + 1
    else
      to_delayed(id, m, now)
      requeued = requeued + 1
    end
  elseif raw then
    redis.call('ZADD', KEYS[4], now, id)
    dead = dead + 1
  end
end
if requeued > 0 then wake(WAKE_BOSS) end
count('retry', requeued, now)
count('dead', dead, now)
unreserve_expired(now)
prune_key_times(now * 1000)
local dropped = trim_dead(now, ARGV[5], ARGV[6])
trim_results(now, tonumber(ARGV[7]), tonumber(ARGV[8]))
unwait_expired(now)
if KEYS[20] then
  local none = {}
  for i = 1, 4 + HISTORY_BINS do none[i] = 0 end
  history_merge(KEYS[19], KEYS[20], math.floor(now / 60000), none,
    topic_backlog(KEYS[1], KEYS[12], KEYS[2], KEYS[9], now))
end
return { requeued, dead, next_deadline(), now, dropped }
