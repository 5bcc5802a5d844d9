//! The consumer side of one topic: claim, ack, extend, nack, release and requeue, each one
//! script call. The runtime drives these; they hold no state and start no tasks.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::{FromRedisValue, ScriptInvocation, Value};

use super::buckets::Buckets;
use super::call::invoke;
use super::envelope::Envelope;
use super::flow::Flow;
use super::keys::TopicKeys;
use super::scripts;
pub use super::settle_failed::NackOutcome;
use crate::connection::RedisConn;
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::time::millis;

/// One claimed delivery: the message and the fence token its acks must present.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The message id.
    pub id: MessageId,
    /// The envelope, attempt already counting this delivery.
    pub envelope: Envelope,
}

impl Delivery {
    /// The fence token of this delivery.
    pub fn token(&self) -> u64 {
        self.envelope.token
    }

    /// What its ack presents: the id, the fence token and the `dedup_for` window (ms, 0 for
    /// none) the ack reserves the id for.
    pub fn receipt(&self) -> Receipt {
        (self.id.clone(), self.envelope.token, self.envelope.dedup_ms)
    }
}

/// An ack's `(id, fence token, dedup_for window ms)`: see [`Delivery::receipt`].
pub type Receipt = (MessageId, u64, u64);

/// What one `claim_due` call found.
#[derive(Debug, Default)]
pub struct ClaimBatch {
    /// Redis' clock when the claim ran (ms).
    pub now_ms: u64,
    /// The same instant in microseconds.
    pub now_us: u64,
    /// When the earliest message still delayed is due (ms), if any.
    pub next_due_ms: Option<u64>,
    /// The claimed deliveries.
    pub claimed: Vec<Delivery>,
    /// Claimed ids that cannot be delivered, with the reason: an envelope that does not parse
    /// (moved to the dead letters) or is missing (dropped).
    pub undeliverable: Vec<(MessageId, String)>,
    /// The topic is paused: nothing was claimed, and nothing will be until it is resumed
    /// (a resume wakes the bosses).
    pub paused: bool,
    /// Due messages wait on the topic's rate limit: `next_due_ms` is when it lets the next
    /// one go, and no send or retry can make a claim before then take anything.
    pub rate_limited: bool,
}

/// What `requeue_expired` did.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequeueReport {
    /// Expired deliveries moved back to `delayed`, due now.
    pub requeued: usize,
    /// Expired deliveries that had used max_attempts, moved to the dead letters.
    pub dead: usize,
    /// The earliest ack deadline still in flight (ms), if any.
    pub next_deadline_ms: Option<u64>,
    /// Redis' clock when it ran (ms).
    pub now_ms: u64,
    /// Dead letters dropped past the topic's bounds (`dead_max`, `dead_ttl`).
    pub dead_dropped: usize,
}

/// The consumer protocol of one topic.
#[derive(Clone)]
pub struct TopicQueue {
    pub(super) conn: RedisConn,
    /// Shared by the clones, as the flow: the runtime clones the queue for every delivery, and
    /// a copy of the keys was some twenty allocations a message.
    pub(super) keys: Arc<TopicKeys>,
    /// The first far bucket the last claim saw (-1: none), declared on the next claim so that
    /// it can promote it (see "Declared buckets" in far.lua); shared by the clones.
    far_head: Arc<AtomicI64>,
    /// The topic's rate limit and dead-letter bounds, which its scripts enforce.
    pub(super) flow: Arc<Flow>,
    /// Dead letters the calls dropped past the bounds, not yet taken (see
    /// [`take_dead_dropped`](TopicQueue::take_dead_dropped)); shared by the clones.
    pub(super) dead_dropped: Arc<AtomicU64>,
}

/// Ids one claim or ack call handles at most: the scripts pass them to single commands
/// (`HMGET`, `ZADD`, ...) with `unpack`, which Lua limits to a few thousand values.
pub const MAX_CLAIM_BATCH: usize = 1_000;

/// Dead letters one call drops at most past the topic's bounds (`prelude.lua`'s
/// `DEAD_DROP_PER_CALL`): a caller that dropped this many calls again.
pub const DEAD_DROP_PER_CALL: usize = 1_000;

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn text(v: Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

fn optional_ms(v: i64) -> Option<u64> {
    (v >= 0).then_some(v as u64)
}

impl TopicQueue {
    /// The queue of the topic whose keys are `keys`, over `conn`.
    pub fn new(conn: RedisConn, keys: TopicKeys) -> Self {
        Self {
            conn,
            keys: Arc::new(keys),
            far_head: Arc::new(AtomicI64::new(-1)),
            flow: Arc::default(),
            dead_dropped: Arc::default(),
        }
    }

    /// The same queue, claiming within `flow`'s rate limit and keeping dead letters within
    /// its bounds (the default: no limit; 10,000 dead letters for 30 days).
    pub fn with_flow(mut self, flow: Flow) -> Self {
        self.flow = Arc::new(flow);
        self
    }

    /// The queue's flow control.
    pub fn flow(&self) -> &Flow {
        &self.flow
    }

    /// Dead letters dropped past the bounds by this queue's calls (any clone) since the last
    /// call of this.
    pub fn take_dead_dropped(&self) -> u64 {
        self.dead_dropped.swap(0, Ordering::Relaxed)
    }

    /// Its connection (for the calls other systems make on its topic).
    pub(crate) fn conn(&self) -> &RedisConn {
        &self.conn
    }

    /// The topic's keys.
    pub fn keys(&self) -> &TopicKeys {
        &self.keys
    }

    async fn invoke<T: FromRedisValue>(&self, script: &ScriptInvocation<'_>) -> Result<T> {
        invoke(&self.conn, &self.keys, script).await
    }

    /// Moves up to `max` (at most 1,000) due messages to in-flight with an ack deadline `lease`
    /// from now.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call;
    /// [`Error::CorruptEnvelope`](crate::Error::CorruptEnvelope) is not returned: such messages
    /// are dead-lettered.
    pub async fn claim_due(&self, max: usize, lease: Duration) -> Result<ClaimBatch> {
        let k = &self.keys;
        let head = self.far_head.load(Ordering::Relaxed);
        let far = Buckets::default().bucket((head >= 0).then_some(head));
        let reply: Vec<Value> = self
            .invoke(&scripts::claim_due(
                k,
                &far,
                max.clamp(1, MAX_CLAIM_BATCH),
                millis(lease),
                &self.flow,
            ))
            .await?;
        let mut it = reply.into_iter();
        let (Some(now), Some(next), Some(head), Some(limited), Some(token)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            return Err(Error::unexpected("claim_due", &"a short reply"));
        };
        let head = int(&head).ok_or_else(|| Error::unexpected("claim_due", &head))?;
        let next = int(&next).ok_or_else(|| Error::unexpected("claim_due", &next))?;
        let paused = next == -2;
        if !paused {
            self.far_head.store(head, Ordering::Relaxed);
        }
        let mut batch = ClaimBatch {
            now_us: int(&now).ok_or_else(|| Error::unexpected("claim_due", &now))? as u64,
            next_due_ms: optional_ms(next),
            paused,
            rate_limited: int(&limited) == Some(1),
            ..ClaimBatch::default()
        };
        batch.now_ms = batch.now_us / 1000;
        let token = int(&token).ok_or_else(|| Error::unexpected("claim_due", &token))? as u64;
        while let (Some(id), Some(env)) = (it.next(), it.next()) {
            let id = MessageId::from_stored(
                text(id).ok_or_else(|| Error::unexpected("claim_due", &"id"))?,
            );
            match env {
                Value::BulkString(raw) if raw == b"corrupt" || raw == b"orphan" => {
                    let why = if raw == b"corrupt" {
                        "its envelope does not parse; moved to the dead letters"
                    } else {
                        "its envelope is missing; dropped"
                    };
                    batch.undeliverable.push((id, why.to_string()));
                }
                // Stored as it was: this delivery is one more attempt, under the claim's token.
                Value::BulkString(raw) => {
                    match Envelope::parse(&raw).and_then(|e| e.delivered(token)) {
                        Ok(envelope) => batch.claimed.push(Delivery { id, envelope }),
                        Err(why) => {
                            let buried: i64 = self.invoke(&scripts::bury(k, &id, token)).await?;
                            let done = if buried == 1 {
                                "moved to the dead letters"
                            } else {
                                "left"
                            };
                            batch.undeliverable.push((id, format!("{why}; {done}")));
                        }
                    }
                }
                other => return Err(Error::unexpected("claim_due", &other)),
            }
        }
        Ok(batch)
    }

    /// Acks deliveries; `true` for each that still owned its message (now deleted), `false`
    /// for a stale one (left untouched).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn ack(&self, deliveries: &[Receipt]) -> Result<Vec<bool>> {
        let k = &self.keys;
        let mut acked = Vec::with_capacity(deliveries.len());
        // The script unpacks its ids into single commands; Lua caps how many one call takes.
        for chunk in deliveries.chunks(MAX_CLAIM_BATCH) {
            let v: Vec<i64> = self.invoke(&scripts::ack(k, chunk)).await?;
            acked.extend(v.into_iter().map(|x| x == 1));
        }
        Ok(acked)
    }

    /// Pushes the ack deadline of deliveries out to at least `lease` from now (a later
    /// deadline stays); `false` for a stale one.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn extend(
        &self,
        lease: Duration,
        deliveries: &[(MessageId, u64)],
    ) -> Result<Vec<bool>> {
        let inv = scripts::extend(&self.keys, millis(lease), deliveries);
        let v: Vec<i64> = self.invoke(&inv).await?;
        Ok(v.into_iter().map(|x| x == 1).collect())
    }

    /// Hands claimed deliveries back to `delayed`, due now, without using up an attempt (for
    /// a clean shutdown). Returns how many were handed back; stale ones are skipped.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn release(&self, deliveries: &[(MessageId, u64)]) -> Result<usize> {
        if deliveries.is_empty() {
            return Ok(0);
        }
        let n: usize = self
            .invoke(&scripts::release(&self.keys, deliveries))
            .await?;
        Ok(n)
    }

    /// Moves up to `max` deliveries whose ack deadline passed back to `delayed` (due now), or
    /// to the dead letters when they used max_attempts.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn requeue_expired(
        &self,
        max: usize,
        default_max_attempts: u32,
    ) -> Result<RequeueReport> {
        let k = &self.keys;
        let reply: Vec<i64> = self
            .invoke(&scripts::requeue_expired(
                k,
                max.max(1),
                default_max_attempts,
                &self.flow,
            ))
            .await?;
        let [requeued, dead, next, now, dropped] = reply[..] else {
            return Err(Error::unexpected("requeue_expired", &reply));
        };
        self.dead_dropped
            .fetch_add(dropped.max(0) as u64, Ordering::Relaxed);
        Ok(RequeueReport {
            requeued: requeued as usize,
            dead: dead as usize,
            next_deadline_ms: optional_ms(next),
            now_ms: now as u64,
            dead_dropped: dropped.max(0) as usize,
        })
    }
}
