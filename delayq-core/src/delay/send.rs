//! The delay queue's producer calls: send (one, with options, a batch). Cancel, reschedule
//! and counts are in pending.rs, the dead-letter calls in dead.rs, the operator's reads in
//! inspect.rs.

use std::time::{Duration, SystemTime};

use redis::{ErrorKind, ServerErrorKind, Value};
use serde::Serialize;

use super::buckets::{declaring, Buckets};
use super::call::{explain, on_topic};
use super::keys::TopicKeys;
use super::queue::TopicQueue;
use super::scripts::{self, Due, Outgoing};
use super::send_options::{Priority, SendOptions, SendOutcome, When};
use crate::catalog::Registered;
use crate::connection::RedisConn;
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;
use crate::trace::current_traceparent;

/// Messages per script call in `send_batch`; the calls of one batch share one round trip.
/// Calls of 100 let consumers' claims run between them (keep-up's p99 at c200 fell from
/// 35 ms to 9), but a batch then fails partway (out of memory: the first calls written, the
/// error returned), and a cluster connection sends a whole pipeline again when one call in it
/// is answered TRYAGAIN or MOVED, running the calls that had run once more: a message
/// cancelled or acked in between came back. So a batch of up to 10,000 stays one call.
const BATCH_CHUNK: usize = 10_000;

impl Producer {
    pub(crate) fn keys(&self, topic: &str) -> Result<TopicKeys> {
        TopicKeys::on(&self.conn, self.namespace(), topic)
    }

    /// The consumer protocol of `topic` over this producer's connection.
    pub(crate) fn queue(&self, topic: &str) -> Result<TopicQueue> {
        Ok(TopicQueue::new(self.conn.clone(), self.keys(topic)?))
    }

    /// What a send checks before it writes to `topic`: the namespace's layout, and the
    /// topic's registry entry (each a round trip the first time only).
    /// Both are idempotent: retried once on a lost connection, as the send is.
    pub(super) async fn before_first_write(&self, topic: &str) -> Result<()> {
        self.conn
            .retry_once(|| async {
                self.check_layout().await?;
                self.register(Registered::Topic, topic).await
            })
            .await
    }

    /// Sends `payload` to `topic`, due `delay` from now (Redis' clock).
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Encode`](crate::Error::Encode) when the payload does not serialize;
    /// [`Error::PayloadTooLarge`](crate::Error::PayloadTooLarge);
    /// [`Error::DueTooFar`](crate::Error::DueTooFar); [`Error::Redis`](crate::Error::Redis) when
    /// Redis does not answer or refuses the call. Nothing is sent on any of them.
    pub async fn send<T: Serialize + ?Sized>(
        &self,
        topic: &str,
        payload: &T,
        delay: Duration,
    ) -> Result<MessageId> {
        let outcome = self
            .send_with(topic, payload, SendOptions::new().delay(delay))
            .await?;
        Ok(outcome.id().clone())
    }

    /// Sends `payload` to `topic`, due at `at`.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn send_at<T: Serialize + ?Sized>(
        &self,
        topic: &str,
        payload: &T,
        at: SystemTime,
    ) -> Result<MessageId> {
        let outcome = self
            .send_with(topic, payload, SendOptions::new().at(at))
            .await?;
        Ok(outcome.id().clone())
    }

    /// Sends with options: a due time, your own id (dedup or replace), max_attempts.
    ///
    /// # Errors
    /// As [`send`](Self::send), and [`Error::InvalidOption`](crate::Error::InvalidOption) or
    /// [`Error::InvalidId`](crate::Error::InvalidId) for a bad option; with `replicas(n)`,
    /// [`Error::NotReplicated`](crate::Error::NotReplicated) when fewer replicas acknowledged the
    /// write in time (it was written to the primary).
    pub async fn send_with<T: Serialize + ?Sized>(
        &self,
        topic: &str,
        payload: &T,
        options: SendOptions,
    ) -> Result<SendOutcome> {
        let keys = self.keys(topic)?;
        let due = options.when.due()?;
        options.check_id_options()?;
        let id = match &options.id {
            Some(id) if options.trusted_id => MessageId::from_stored(id.clone()),
            Some(id) => MessageId::new(id.clone())?,
            None => MessageId::for_due(due.expected_unix_ms()),
        };
        let max_attempts = options.attempts_arg()?;
        // A flow step's payload was checked against the limit of the producer that started
        // the flow; the runtime that sends it later may have another.
        let payload = if options.trusted_id {
            serde_json::to_vec(payload)?
        } else {
            self.encode(payload)?
        };
        self.before_first_write(topic).await?;
        let trace = current_traceparent();
        let far = Buckets::default()
            .due(&keys, due.expected_unix_ms())
            .id(&keys, &id);
        // A send that waits for replicas writes on the connection it will wait on (and on
        // which nothing else waits behind it), noting first where the write will go.
        let started = std::time::Instant::now();
        let dedup_ms = options.dedup_ms();
        let priority = options.priority.level();
        let key = options.key.as_deref().unwrap_or("");
        let write = |conn: RedisConn| {
            let (keys, far, trace, payload, id) = (&keys, far.clone(), &trace, &payload, &id);
            async move {
                let (at, when) = due.at_and_ms();
                let shared = Outgoing {
                    replace: options.replace || options.debounce,
                    at,
                    max_attempts,
                    dedup_ms,
                    priority,
                    key,
                    trace,
                };
                declaring(&conn, keys, far, |far| {
                    scripts::send(keys, far, &shared, [(id, when, payload.as_slice())])
                })
                .await
            }
        };
        let (lane, codes): (_, String) = if options.replicas == 0 {
            // The id is fixed before the call: a second run is a duplicate of the first.
            let once = || write(self.conn.clone());
            (None, self.conn.retry_once(once).await?)
        } else {
            let lane = self.replicated.lane(&keys.msg).await?;
            match write(lane.conn.clone()).await {
                Ok(codes) => (Some(lane), codes),
                Err(e) => {
                    // The primary last found for this key may have changed (a failover, a
                    // slot move): look again next time, and at once when the node said so
                    // (MOVED/ASK: the script did not run).
                    self.replicated.forget(&keys.msg);
                    if !e.redirected() {
                        return Err(e);
                    }
                    let lane = self.replicated.lane(&keys.msg).await?;
                    let codes = write(lane.conn.clone())
                        .await
                        .inspect_err(|_| self.replicated.forget(&keys.msg))?;
                    (Some(lane), codes)
                }
            }
        };
        let outcome = match codes.as_str() {
            "c" => SendOutcome::Created(id),
            // A generated id is this call's alone: a duplicate of it is this call's own first
            // run, whose reply a lost connection kept from it.
            "d" if options.id.is_none() => SendOutcome::Created(id),
            "d" => SendOutcome::Duplicate(id),
            "r" => SendOutcome::Replaced(id),
            _ => return Err(Error::unexpected("send", &codes)),
        };
        if let Some(lane) = lane {
            // The replica timeout counts from the start of the send: time spent behind
            // another round of waiting on this connection is part of it.
            let deadline = started + options.replica_timeout;
            let acked = self
                .replicated
                .wait(lane, options.replicas, deadline)
                .await
                .inspect_err(|_| self.replicated.forget(&keys.msg))?;
            if acked < options.replicas as usize {
                return Err(Error::NotReplicated {
                    acked,
                    wanted: options.replicas,
                });
            }
        }
        Ok(outcome)
    }

    /// Sends many messages in one round trip (script calls of up to 10,000 messages each,
    /// pipelined). Every payload is encoded and checked before anything is written.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Encode`](crate::Error::Encode) or
    /// [`Error::PayloadTooLarge`](crate::Error::PayloadTooLarge) for any item (then nothing is
    /// sent); [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the
    /// call.
    pub async fn send_batch<T, I>(&self, topic: &str, items: I) -> Result<Vec<MessageId>>
    where
        T: Serialize,
        I: IntoIterator<Item = (T, Duration)>,
    {
        let keys = self.keys(topic)?;
        let mut encoded = Vec::new();
        for (payload, delay) in items {
            let due = When::Delay(delay).due()?;
            encoded.push((
                MessageId::for_due(due.expected_unix_ms()),
                self.encode(&payload)?,
                due,
            ));
        }
        if encoded.is_empty() {
            return Ok(Vec::new());
        }
        self.before_first_write(topic).await?;
        let trace = current_traceparent();
        let chunks: Vec<_> = encoded.chunks(BATCH_CHUNK).collect();
        let shared = Outgoing {
            replace: false,
            at: false,
            max_attempts: 0,
            dedup_ms: 0,
            priority: Priority::Normal.level(),
            key: "",
            trace: &trace,
        };
        // Every due of a batch is a delay (`at` false above).
        let call = |chunk: &[(MessageId, Vec<u8>, Due)], far: &Buckets| {
            let messages = chunk
                .iter()
                .map(|(id, payload, due)| (id, due.at_and_ms().1, payload.as_slice()));
            scripts::send(&keys, far, &shared, messages)
        };
        let guesses: Vec<Buckets> = chunks
            .iter()
            .map(|chunk| {
                chunk.iter().fold(Buckets::default(), |far, (id, _, due)| {
                    far.due(&keys, due.expected_unix_ms()).id(&keys, id)
                })
            })
            .collect();
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for (chunk, far) in chunks.iter().zip(&guesses) {
            pipe.invoke_script(&call(chunk, far));
        }
        let pipe = &pipe;
        // Every id is fixed before the call: a second run of the batch (or of any part of it)
        // finds the messages of the first as duplicates, so a lost connection is retried.
        let once = || async {
            let replies: Vec<redis::RedisResult<Value>> =
                on_topic(&self.conn, &keys, |mut conn| async move {
                    pipe.query_async(&mut conn).await
                })
                .await?;
            // A call that ran nothing (its script not loaded after a Redis restart, or far
            // buckets it was not given) runs again on its own; any other failure is the
            // batch's.
            for ((chunk, far), reply) in chunks.iter().zip(&guesses).zip(replies) {
                match reply {
                    Ok(_) => {}
                    Err(e) if ran_nothing(&e) => {
                        let _: String =
                            declaring(&self.conn, &keys, far.clone(), |far| call(chunk, far))
                                .await?;
                    }
                    Err(e) => return Err(explain(&self.conn, &keys, e).await),
                }
            }
            Ok(())
        };
        self.conn.retry_once(once).await?;
        Ok(encoded.into_iter().map(|(id, _, _)| id).collect())
    }
}

/// Whether a failed script call of a pipeline ran nothing: its script was not loaded (Redis
/// restarted or flushed its scripts), or it asked for far buckets before writing. (A cluster
/// connection sends the whole pipeline again itself when a call in it is answered MOVED.)
fn ran_nothing(e: &redis::RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) || e.code() == Some("DELAYQ_NEED")
}
