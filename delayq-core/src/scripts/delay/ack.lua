-- ack.lua: finished deliveries leave `inflight` and their envelopes are deleted.
-- KEYS, ARGV[1], ARGV[2]: as in prelude.lua
-- ARGV[3] n, ARGV[4] the number of tokens, each token with how many ids follow under it, the
-- ids, then pairs of id, `dedup_for` window (ms): see `ack_receipts` in prelude.lua, which
-- does the work (acks also ride on claims).
-- Returns a string of one character per id, in their order: '1' acked, '0' stale (that
-- delivery no longer owns the message).
return ack_receipts(3)
