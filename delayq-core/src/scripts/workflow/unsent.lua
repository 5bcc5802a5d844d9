-- unsent.lua: a page of the steps written sent, for the sweep of a start's intent whose
-- sender died before it had sent them all (`unsent` in meta, see create.lua): it sends each
-- again under its step id, a duplicate in its topic where it was sent (there, or ended and
-- reserved), then runs started.lua. A step sent after a settle made it ready is written sent
-- too, and sent again as a duplicate as well.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] the cursor of the states' HSCAN ('0' to begin)   ARGV[4] how many to look at a page
-- Returns { the next cursor ('0' after the last page, and for a flow that is gone, cancelled
-- or whose start finished), { { name, gen, topic, options JSON, payload }, ... } (as
-- outbox.lua gives them) }.
local state = redis.call('HGET', KEYS[1], 'state')
if not state or state == 'cancelled' or not redis.call('HGET', KEYS[1], 'unsent') then
  return { '0', {} }
end
local scan = redis.call('HSCAN', KEYS[3], ARGV[3], 'COUNT', tonumber(ARGV[4]))
local flat, names, gens, out = scan[2], {}, {}, {}
for i = 1, #flat, 2 do
  local gen = string.match(flat[i + 1], '^sent (%d+) ')
  if gen then
    names[#names + 1] = flat[i]
    gens[#gens + 1] = tonumber(gen)
  end
end
for a = 1, #names, 1000 do
  local b = math.min(a + 999, #names)
  prefetch(names, a, b)
  local payloads = redis.call('HMGET', KEYS[5], unpack(names, a, b))
  for i = a, b do
    local rec = record(names[i])
    -- A step without a record (a hand edit) is left: nothing says where it goes.
    if rec then
      out[#out + 1] = { names[i], gens[i], rec.topic, cjson.encode(rec.opts or {}),
        payloads[i - a + 1] or 'null' }
    end
  end
end
return { scan[1], out }
