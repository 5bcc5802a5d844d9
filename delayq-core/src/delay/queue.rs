//! The consumer side of one topic: claim, ack, extend, nack, release and requeue, each one
//! script call. The runtime drives these; they hold no state and start no tasks.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::{FromRedisValue, ScriptInvocation, Value};

use super::buckets::{declaring, Buckets};
use super::call::invoke;
use super::envelope::Envelope;
use super::keys::TopicKeys;
use super::scripts::{self, Failure};
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
}

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
}

/// What `nack` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NackOutcome {
    /// Back in `delayed`, due after the backoff.
    Retry,
    /// Moved to the dead letters.
    Dead,
    /// This delivery no longer owns the message; nothing changed.
    Stale,
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
}

/// The consumer protocol of one topic.
#[derive(Clone)]
pub struct TopicQueue {
    conn: RedisConn,
    keys: TopicKeys,
    /// The first far bucket the last claim saw (-1: none), declared on the next claim so that
    /// it can promote it (see "Declared buckets" in far.lua); shared by the clones.
    far_head: Arc<AtomicI64>,
}

/// Ids one claim or ack call handles at most: the scripts pass them to single commands
/// (`HMGET`, `ZADD`, ...) with `unpack`, which Lua limits to a few thousand values.
pub const MAX_CLAIM_BATCH: usize = 1_000;

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
            keys,
            far_head: Arc::new(AtomicI64::new(-1)),
        }
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
            ))
            .await?;
        let mut it = reply.into_iter();
        let (Some(now), Some(next), Some(head)) = (it.next(), it.next(), it.next()) else {
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
            ..ClaimBatch::default()
        };
        batch.now_ms = batch.now_us / 1000;
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
                Value::BulkString(raw) => match Envelope::parse(&raw) {
                    Ok(envelope) => batch.claimed.push(Delivery { id, envelope }),
                    Err(why) => batch.undeliverable.push((id, why)),
                },
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
    pub async fn ack(&self, deliveries: &[(MessageId, u64)]) -> Result<Vec<bool>> {
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

    /// Settles a failed delivery: back to `delayed` after `backoff`, or dead once it used
    /// max_attempts (`default_max_attempts` unless the message set its own), or dead at once
    /// when `dead_reason` is given. `error` is kept as the message's last error.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn nack(
        &self,
        id: &MessageId,
        token: u64,
        backoff: Duration,
        error: &str,
        default_max_attempts: u32,
        dead_reason: Option<&str>,
    ) -> Result<NackOutcome> {
        let k = &self.keys;
        let due = crate::time::time_to_ms(std::time::SystemTime::now()) + millis(backoff);
        let far = Buckets::default().due(k, due);
        let reply: String = declaring(&self.conn, k, far, |far| {
            scripts::nack(
                k,
                far,
                id,
                token,
                Failure {
                    backoff_ms: millis(backoff),
                    error,
                    default_max_attempts,
                    dead_reason,
                },
            )
        })
        .await?;
        match reply.as_str() {
            "retry" => Ok(NackOutcome::Retry),
            "dead" => Ok(NackOutcome::Dead),
            "stale" => Ok(NackOutcome::Stale),
            _ => Err(Error::unexpected("nack", &reply)),
        }
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
            ))
            .await?;
        let [requeued, dead, next, now] = reply[..] else {
            return Err(Error::unexpected("requeue_expired", &reply));
        };
        Ok(RequeueReport {
            requeued: requeued as usize,
            dead: dead as usize,
            next_deadline_ms: optional_ms(next),
            now_ms: now as u64,
        })
    }
}
