//! The consumer side of one topic: extend, nack, release and requeue (claim and ack are in
//! `claim.rs`), each one script call. The runtime drives these; they hold no state and start
//! no tasks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::{FromRedisValue, ScriptInvocation};

use super::call::invoke;
use super::flow::Flow;
use super::keys::TopicKeys;
use super::scripts;
pub use super::settle_failed::NackOutcome;
use crate::connection::RedisConn;
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::time::millis;

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
    /// The far buckets the last claim saw due for promotion (the first far bucket, or more
    /// when it was behind), declared on the next claim so that it can promote them (see
    /// "Declared buckets" in far.lua); shared by the clones.
    pub(super) far_heads: Arc<Mutex<Vec<i64>>>,
    /// The topic's rate limit and dead-letter bounds, which its scripts enforce.
    pub(super) flow: Arc<Flow>,
    /// Dead letters the calls dropped past the bounds, not yet taken (see
    /// [`take_dead_dropped`](TopicQueue::take_dead_dropped)); shared by the clones.
    pub(super) dead_dropped: Arc<AtomicU64>,
    /// A producer on the queue's connection and namespace, made when first needed (a flow
    /// step's end sends the steps that waited for it); shared by the clones, so its layout
    /// check and registrations are made once.
    pub(super) producer: Arc<std::sync::OnceLock<crate::producer::Producer>>,
}

/// Ids one claim or ack call handles at most: the scripts pass them to single commands
/// (`HMGET`, `ZADD`, ...) with `unpack`, which Lua limits to a few thousand values.
pub const MAX_CLAIM_BATCH: usize = 1_000;

/// Dead letters one call drops at most past the topic's bounds (`prelude.lua`'s
/// `DEAD_DROP_PER_CALL`): a caller that dropped this many calls again.
pub const DEAD_DROP_PER_CALL: usize = 1_000;

pub(super) fn optional_ms(v: i64) -> Option<u64> {
    (v >= 0).then_some(v as u64)
}

impl TopicQueue {
    /// The queue of the topic whose keys are `keys`, over `conn`.
    pub fn new(conn: RedisConn, keys: TopicKeys) -> Self {
        Self {
            conn,
            keys: Arc::new(keys),
            far_heads: Arc::default(),
            flow: Arc::default(),
            dead_dropped: Arc::default(),
            producer: Arc::default(),
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

    /// Counts `n` dead letters a call dropped past the bounds (for `take_dead_dropped`).
    pub(super) fn count_dead_dropped(&self, n: i64) {
        self.dead_dropped
            .fetch_add(n.max(0) as u64, Ordering::Relaxed);
    }

    /// A producer on its connection and namespace (made once, shared by the clones).
    pub(crate) fn producer(&self) -> &crate::producer::Producer {
        self.producer.get_or_init(|| {
            crate::producer::Producer::over(self.conn.clone(), &self.keys.namespace)
        })
    }

    /// Its connection (for the calls other systems make on its topic).
    pub(crate) fn conn(&self) -> &RedisConn {
        &self.conn
    }

    /// The topic's keys.
    pub fn keys(&self) -> &TopicKeys {
        &self.keys
    }

    pub(super) async fn invoke<T: FromRedisValue>(
        &self,
        script: &ScriptInvocation<'_>,
    ) -> Result<T> {
        invoke(&self.conn, &self.keys, script).await
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
