-- far.lua: the far buckets, shared by the delay queue's scripts (prepended after prelude.lua,
-- the parts a script uses).
--
-- The hot keys (`delayed`, `msg`) hold only messages due within about two minutes; one due
-- later waits in the far bucket of its due time, b = floor(due / width), the HASH
-- KEYS[7] .. ':' .. b (id -> far record), until the bucket is promoted: a whole bucket before
-- it starts, its messages move into the hot keys (`promote`, run by claim_due). So the hot
-- keys stay small however many messages wait for days, and a far message costs one hash
-- entry. KEYS[7] `far` is a ZSET of the buckets not promoted yet (member b, score a lower
-- bound of the earliest due time in it); KEYS[9] `farinfo` a HASH with `count` (messages in
-- far buckets) and `width` (the bucket width in ms, fixed when the topic's first far message
-- is stored). A message is found by id without an index when the id is generated: a ULID of
-- its due time, whose bucket is its time's. KEYS[8] `where` (id -> bucket) lists the others
-- (user ids, and a generated id whose time falls in another bucket than its due time).
--
-- Declared buckets. A script touches only keys it was given: the far bucket keys a call may
-- touch follow the topic's eighteen keys (KEYS[19] on). On Redis Cluster a key a script uses
-- without declaring it fails the script partway while its slot migrates, with the writes
-- before it kept; a declared one makes Redis answer TRYAGAIN (or ASK) before the script
-- starts. So a script first works out, reading declared keys only, which buckets it needs
-- (`need`), and when one is missing returns `DELAYQ_NEED <width> <b> ...` before it writes
-- anything; the client calls again declaring them (delay/buckets.rs, `declaring`). For the same
-- reason a script never writes a key after it may have emptied it (Redis deletes an empty
-- hash or sorted set, and a key that is missing mid-script is "not local" while its slot
-- migrates): scripts place a message in its new home first and clear the old one after.
local DEFAULT_BUCKET_MS = 60000
-- Messages one call promotes at most (it passes them to single commands with `unpack`).
local PROMOTE_MAX = 1000

local bucket_width = nil
local function width()
  if not bucket_width then
    bucket_width = tonumber(redis.call('HGET', KEYS[9], 'width')) or DEFAULT_BUCKET_MS
  end
  return bucket_width
end

local width_stored = false

local function bucket_of(ms)
  return math.floor(ms / width())
end

-- When bucket b is promoted: a whole bucket before it starts.
local function promote_at(b)
  return (b - 1) * width()
end

-- Whether a message due at `due` goes to a far bucket now.
local function goes_far(due, now)
  return promote_at(bucket_of(due)) > now
end

-- Bucket keys and member names, made once per bucket and call.
local far_keys, far_members = {}, {}
local function bucket_name(b)
  local key = far_keys[b]
  if not key then
    far_members[b] = string.format('%d', b)
    key = KEYS[7] .. ':' .. far_members[b]
    far_keys[b] = key
  end
  return key
end
local function far_member(b)
  bucket_name(b)
  return far_members[b]
end

local declared = nil
local function is_declared(b)
  if not declared then
    declared = {}
    for i = 19, #KEYS do declared[KEYS[i]] = true end
  end
  return declared[bucket_name(b)] == true
end

-- The key of bucket b, which the call must have declared (a script that reaches here with an
-- undeclared bucket has a bug in its `need` step; it stops rather than touch the key).
local function far_key(b)
  if not is_declared(b) then
    error('delayq: far bucket ' .. bucket_name(b) .. ' used without being declared')
  end
  return far_keys[b]
end

-- The buckets this call needs and was not given.
local wanted, wanted_set = {}, {}
local function need(b)
  -- (b ~= b: a `where` entry of 'nan', by hand, which no bucket is named by.)
  if b and b == b and not wanted_set[b] and not is_declared(b) then
    wanted_set[b] = true
    wanted[#wanted + 1] = far_member(b)
  end
end

-- The reply that asks the client to call again declaring the buckets `need` found missing,
-- or nil when it has them all. A script returns it before its first write.
local function missing_buckets()
  if #wanted == 0 then return nil end
  return redis.error_reply('DELAYQ_NEED ' .. width() .. ' ' .. table.concat(wanted, ' '))
end

-- Changes to `far` and the far count, gathered while a script places messages and written
-- once by far_flush() (a send of 10,000 messages writes them once, not 10,000 times). Every
-- script that calls place() calls far_flush() before it returns.
local far_delta, far_heads = 0, {}
local function far_count(delta)
  far_delta = far_delta + delta
end
local function far_flush()
  for b, due in pairs(far_heads) do
    redis.call('ZADD', KEYS[7], 'LT', due, far_member(b))
  end
  far_heads = {}
  if far_delta ~= 0 then redis.call('HINCRBY', KEYS[9], 'count', far_delta) end
  far_delta = 0
end

-- The time (unix ms) of a ULID: its first 10 characters, Crockford base 32; nil for an id
-- that is not one.
local CROCKFORD = nil
local function id_time(id)
  if #id ~= 26 then return nil end
  if not CROCKFORD then
    CROCKFORD = {}
    local digits = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
    for i = 1, 32 do CROCKFORD[string.byte(digits, i)] = i - 1 end
  end
  -- One string.byte for the ten characters: a call costs more than the arithmetic.
  local c = CROCKFORD
  local b1, b2, b3, b4, b5, b6, b7, b8, b9, b10 = string.byte(id, 1, 10)
  local v1, v2, v3, v4, v5 = c[b1], c[b2], c[b3], c[b4], c[b5]
  local v6, v7, v8, v9, v10 = c[b6], c[b7], c[b8], c[b9], c[b10]
  if not (v1 and v2 and v3 and v4 and v5 and v6 and v7 and v8 and v9 and v10) then
    return nil
  end
  return ((((((((v1 * 32 + v2) * 32 + v3) * 32 + v4) * 32 + v5) * 32 + v6) * 32 + v7) * 32
    + v8) * 32 + v9) * 32 + v10
end

-- Whether KEYS[7] / KEYS[8] exist, read once per call (place() creates them).
local any_far, any_where = nil, nil
local function far_exists()
  if any_far == nil then
    any_far = redis.call('EXISTS', KEYS[7]) == 1 or far_delta ~= 0
  end
  return any_far
end
local function where_exists()
  if any_where == nil then any_where = redis.call('EXISTS', KEYS[8]) == 1 end
  return any_where
end

-- The `need` step of far_bucket(id, t): the buckets it may look in. `soon_far` tells that
-- this call places messages far before it looks (a batch), so `far` may exist by then.
local function need_lookup(id, t, soon_far)
  if not (soon_far or far_exists()) then return end
  if t then need(bucket_of(t)) end
  if where_exists() then need(tonumber(redis.call('HGET', KEYS[8], id))) end
end

-- The far bucket that holds `id` (whose ULID time is `t`, nil for another id), or nil. A
-- `where` entry is believed only when its bucket holds the id (one left by a hand edit, or
-- pointing at a bucket that was deleted, would make a send of the id a duplicate of nothing).
local function far_bucket(id, t)
  if not far_exists() then return nil end
  if t then
    local b = bucket_of(t)
    if redis.call('HEXISTS', far_key(b), id) == 1 then return b end
  end
  if not where_exists() then return nil end
  local b = tonumber(redis.call('HGET', KEYS[8], id))
  if b and b == b and redis.call('HEXISTS', far_key(b), id) == 1 then return b end
  return nil
end

-- The type of `key` ('none' when absent), and the error reply naming it when it holds another
-- type than `kind` (another program's key, or a hand edit), else nil. The client's `explain`
-- reads the key's name out of that reply.
local function key_type(key, kind)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= kind then
    return t, redis.error_reply('WRONGTYPE delayq: ' .. key .. ' holds a ' .. t
      .. ' where delayq keeps a ' .. kind)
  end
  return t, nil
end

-- The error reply naming the first far bucket this call was given (KEYS[19] on) that holds
-- something other than a hash, or nil. A script that writes to far buckets asks it before its
-- first write: another program's key there would fail the call partway, with what it wrote
-- before kept (a record outside `far`, never promoted; a message out of flight and nowhere).
local function foreign_bucket()
  for i = 19, #KEYS do
    local _, foreign = key_type(KEYS[i], 'hash')
    if foreign then return foreign end
  end
  return nil
end
