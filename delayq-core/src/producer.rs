//! The producer: send, cancel, reschedule and the dead-letter calls of API.md.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use redis::{ErrorKind, ServerErrorKind, Value};
use serde::Serialize;

use crate::connect::{
    explain, invoke, namespace_from_env, redis_url_from_env, RedisConn, UrlOrigin,
};
use crate::dead::{self, DeadLetter};
use crate::envelope::{millis, time_to_ms, MAX_DUE_MS};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::keys::{validate_namespace, TopicKeys};
use crate::queue::TopicQueue;
use crate::scripts::{on_topic, SCRIPTS};

/// The default payload limit: 1 MiB of encoded JSON.
pub const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;

/// Messages per script call in `send_batch`; the calls of one batch share one round trip.
const BATCH_CHUNK: usize = 10_000;
/// Dead letters moved or deleted per script call, so no call blocks Redis for long.
const DEAD_CHUNK: usize = 1_000;

/// When a message becomes due.
#[derive(Debug, Clone, Copy)]
enum When {
    Delay(Duration),
    At(SystemTime),
}

impl When {
    /// The script's `when_kind` and `when`; a due time past [`MAX_DUE_MS`] is refused before
    /// anything is written (for a delay, judged by this machine's clock: the limit is
    /// thousands of years away, so the clocks' skew does not matter).
    fn args(self) -> Result<(&'static str, u64)> {
        let (kind, ms, due) = match self {
            When::Delay(d) => {
                let ms = millis(d);
                let due = u128::from(time_to_ms(SystemTime::now())) + u128::from(ms);
                ("delay", ms, due)
            }
            When::At(t) => {
                let ms = time_to_ms(t);
                ("at", ms, u128::from(ms))
            }
        };
        if due > u128::from(MAX_DUE_MS) {
            return Err(Error::DueTooFar {
                requested_ms: due,
                limit_ms: MAX_DUE_MS,
            });
        }
        Ok((kind, ms))
    }
}

/// Options for [`Producer::send_with`].
///
/// ```
/// use std::time::Duration;
/// use delayq_core::SendOptions;
/// let opts = SendOptions::new().delay(Duration::from_secs(30)).id("order-7").max_attempts(3);
/// ```
#[derive(Debug, Clone)]
pub struct SendOptions {
    when: When,
    id: Option<String>,
    replace: bool,
    max_attempts: Option<u32>,
}

impl Default for SendOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl SendOptions {
    /// Due now, a generated id, the listener's max_attempts.
    pub fn new() -> Self {
        SendOptions {
            when: When::Delay(Duration::ZERO),
            id: None,
            replace: false,
            max_attempts: None,
        }
    }

    /// Due `delay` after Redis receives it.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.when = When::Delay(delay);
        self
    }

    /// Due at `at` (compared with the Redis server's clock).
    pub fn at(mut self, at: SystemTime) -> Self {
        self.when = When::At(at);
        self
    }

    /// Your own id. Sending the same id again while that message is pending is a no-op
    /// ([`SendOutcome::Duplicate`]) unless [`replace`](Self::replace) is set.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// With a user id: replace a pending (delayed) message with that id, new payload and due
    /// time, fresh attempt count. A message in flight is never replaced (`Duplicate`).
    pub fn replace(mut self, replace: bool) -> Self {
        self.replace = replace;
        self
    }

    /// Handler runs allowed for this message, overriding the listener's `max_attempts`.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }
}

/// What [`Producer::send_with`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// A new message.
    Created(MessageId),
    /// A message with this id is already pending or in flight; nothing changed.
    Duplicate(MessageId),
    /// The pending message with this id was replaced.
    Replaced(MessageId),
}

impl SendOutcome {
    /// The message id.
    pub fn id(&self) -> &MessageId {
        match self {
            SendOutcome::Created(id) | SendOutcome::Duplicate(id) | SendOutcome::Replaced(id) => id,
        }
    }
}

/// What [`Producer::cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// It was pending and is gone; it will not be delivered.
    Removed,
    /// Unknown, already done, or dead (dead letters go through `purge_dead`).
    NotFound,
    /// A consumer is handling it right now; it is not stopped.
    InFlight,
}

/// How many messages of a topic are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopicCounts {
    /// Waiting for their due time (or due and not yet claimed).
    pub delayed: usize,
    /// Claimed by a consumer, not yet acknowledged.
    pub inflight: usize,
    /// In the dead letters.
    pub dead: usize,
}

/// Sends delayed messages and manages them. Cheap to clone; clones share one multiplexed,
/// reconnecting connection.
#[derive(Clone)]
pub struct Producer {
    conn: RedisConn,
    namespace: Arc<str>,
    max_payload: usize,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("namespace", &self.namespace)
            .field("max_payload", &self.max_payload)
            .finish_non_exhaustive()
    }
}

impl Producer {
    /// Connects to `url` (`redis://[user:password@]host:port[/db]`), namespace from
    /// `DELAYQ_NAMESPACE` (default `delayq`). To send to a runtime you run in this process,
    /// take `RuntimeHandle::producer()` instead: it shares the runtime's URL and namespace.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with_origin(url, UrlOrigin::Argument).await
    }

    /// Connects to `DELAYQ_REDIS_URL` (default `redis://127.0.0.1:6379`).
    pub async fn connect_from_env() -> Result<Self> {
        let (url, origin) = redis_url_from_env();
        Self::connect_with_origin(&url, origin).await
    }

    async fn connect_with_origin(url: &str, origin: UrlOrigin) -> Result<Self> {
        let namespace = namespace_from_env();
        validate_namespace(&namespace)?;
        let conn = RedisConn::connect(url, origin).await?;
        Ok(Self::over(conn, &namespace))
    }

    /// A producer over an open connection (the runtime shares its own this way).
    pub(crate) fn over(conn: RedisConn, namespace: &str) -> Self {
        Producer {
            conn,
            namespace: namespace.into(),
            max_payload: DEFAULT_MAX_PAYLOAD,
        }
    }

    /// The same producer under another namespace.
    pub fn with_namespace(mut self, namespace: &str) -> Result<Self> {
        validate_namespace(namespace)?;
        self.namespace = namespace.into();
        Ok(self)
    }

    /// The same producer with another payload limit in bytes (of encoded JSON).
    pub fn with_max_payload(mut self, bytes: usize) -> Self {
        self.max_payload = bytes;
        self
    }

    /// The namespace keys are created under.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn keys(&self, topic: &str) -> Result<TopicKeys> {
        TopicKeys::new(&self.namespace, topic)
    }

    /// The consumer protocol of `topic` over this producer's connection.
    pub(crate) fn queue(&self, topic: &str) -> Result<TopicQueue> {
        Ok(TopicQueue::new(self.conn.clone(), self.keys(topic)?))
    }

    fn encode<T: Serialize + ?Sized>(&self, payload: &T) -> Result<Vec<u8>> {
        let bytes = serde_json::to_vec(payload)?;
        if bytes.len() > self.max_payload {
            return Err(Error::PayloadTooLarge {
                size: bytes.len(),
                limit: self.max_payload,
            });
        }
        Ok(bytes)
    }

    /// Sends `payload` to `topic`, due `delay` from now (Redis' clock).
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
    pub async fn send_with<T: Serialize + ?Sized>(
        &self,
        topic: &str,
        payload: &T,
        options: SendOptions,
    ) -> Result<SendOutcome> {
        let keys = self.keys(topic)?;
        let id = match &options.id {
            Some(id) => MessageId::new(id.clone())?,
            None => MessageId::generate(),
        };
        let max_attempts = match options.max_attempts {
            Some(0) => return Err(Error::Config("max_attempts must be at least 1".into())),
            Some(n) => n,
            None => 0,
        };
        let (kind, when) = options.when.args()?;
        let payload = self.encode(payload)?;
        let mode = if options.replace { "replace" } else { "new" };
        let mut inv = on_topic(&SCRIPTS.send, &keys);
        inv.arg(id.as_str())
            .arg(mode)
            .arg(kind)
            .arg(when)
            .arg(max_attempts)
            .arg(payload);
        let codes: Vec<String> = invoke(&self.conn, &keys, &inv).await?;
        match codes.first().map(String::as_str) {
            Some("created") => Ok(SendOutcome::Created(id)),
            Some("duplicate") => Ok(SendOutcome::Duplicate(id)),
            Some("replaced") => Ok(SendOutcome::Replaced(id)),
            _ => Err(Error::unexpected("send", &codes)),
        }
    }

    /// Sends many messages in one round trip (script calls of up to 10,000 messages each,
    /// pipelined). Every payload is encoded and checked before anything is written.
    pub async fn send_batch<T, I>(&self, topic: &str, items: I) -> Result<Vec<MessageId>>
    where
        T: Serialize,
        I: IntoIterator<Item = (T, Duration)>,
    {
        let keys = self.keys(topic)?;
        let mut encoded = Vec::new();
        for (payload, delay) in items {
            let when = When::Delay(delay).args()?;
            encoded.push((MessageId::generate(), self.encode(&payload)?, when));
        }
        if encoded.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for chunk in encoded.chunks(BATCH_CHUNK) {
            let mut inv = on_topic(&SCRIPTS.send, &keys);
            for (id, payload, (kind, when)) in chunk {
                inv.arg(id.as_str())
                    .arg("new")
                    .arg(*kind)
                    .arg(*when)
                    .arg(0)
                    .arg(payload.as_slice());
            }
            pipe.invoke_script(&inv);
        }
        let result = self
            .conn
            .run(|mut conn| async move {
                let first: redis::RedisResult<Vec<Value>> = pipe.query_async(&mut conn).await;
                match first {
                    // Redis restarted or flushed its scripts. Nothing ran: every call in the
                    // pipeline is the same script, so they all failed. Load it and send the
                    // batch again.
                    Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                        SCRIPTS.send.load_async(&mut conn).await?;
                        pipe.query_async::<Vec<Value>>(&mut conn).await
                    }
                    other => other,
                }
            })
            .await;
        if let Err(e) = result {
            return Err(explain(&self.conn, &keys, e).await);
        }
        Ok(encoded.into_iter().map(|(id, _, _)| id).collect())
    }

    /// Cancels a message that has not started.
    pub async fn cancel(&self, topic: &str, id: &MessageId) -> Result<Cancelled> {
        let keys = self.keys(topic)?;
        let mut inv = on_topic(&SCRIPTS.cancel, &keys);
        inv.arg(id.as_str());
        let reply: String = invoke(&self.conn, &keys, &inv).await?;
        match reply.as_str() {
            "removed" => Ok(Cancelled::Removed),
            "inflight" => Ok(Cancelled::InFlight),
            "notfound" => Ok(Cancelled::NotFound),
            _ => Err(Error::unexpected("cancel", &reply)),
        }
    }

    /// Moves a pending message to `delay` from now; `false` when it is not pending.
    pub async fn reschedule(&self, topic: &str, id: &MessageId, delay: Duration) -> Result<bool> {
        let keys = self.keys(topic)?;
        let (kind, when) = When::Delay(delay).args()?;
        let mut inv = on_topic(&SCRIPTS.reschedule, &keys);
        inv.arg(id.as_str()).arg(kind).arg(when);
        let n: i64 = invoke(&self.conn, &keys, &inv).await?;
        Ok(n == 1)
    }

    /// How many messages of `topic` are delayed, in flight and dead.
    pub async fn counts(&self, topic: &str) -> Result<TopicCounts> {
        let keys = self.keys(topic)?;
        let mut pipe = redis::pipe();
        pipe.zcard(&keys.delayed)
            .zcard(&keys.inflight)
            .zcard(&keys.dead);
        let pipe = &pipe;
        match self
            .conn
            .run(|mut conn| async move { pipe.query_async(&mut conn).await })
            .await
        {
            Ok((delayed, inflight, dead)) => Ok(TopicCounts {
                delayed,
                inflight,
                dead,
            }),
            Err(e) => Err(explain(&self.conn, &keys, e).await),
        }
    }

    /// Dead letters of `topic`, oldest first, by index range (`0..100` for the first 100).
    pub async fn dead_letters(&self, topic: &str, range: Range<usize>) -> Result<Vec<DeadLetter>> {
        let keys = self.keys(topic)?;
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let mut inv = on_topic(&SCRIPTS.dead_list, &keys);
        inv.arg(range.start).arg(range.end - 1);
        let reply: Vec<Value> = invoke(&self.conn, &keys, &inv).await?;
        dead::parse_page(&keys, reply)
    }

    /// Moves one dead letter back to due-now with a fresh attempt count; `false` when it is
    /// not dead (or its envelope does not parse).
    pub async fn replay_dead(&self, topic: &str, id: &MessageId) -> Result<bool> {
        let keys = self.keys(topic)?;
        let mut inv = on_topic(&SCRIPTS.replay_dead, &keys);
        inv.arg("one").arg(id.as_str());
        let (replayed, _, _, _): (usize, usize, u64, usize) =
            invoke(&self.conn, &keys, &inv).await?;
        Ok(replayed == 1)
    }

    /// Moves every dead letter of `topic` back to due-now; returns how many. It replays what
    /// was dead when it started: messages that die again while it runs stay dead.
    pub async fn replay_all_dead(&self, topic: &str) -> Result<usize> {
        let keys = self.keys(topic)?;
        let (mut replayed_total, mut left_dead) = (0, 0);
        let mut cutoff = String::new();
        let mut budget = None;
        loop {
            let mut inv = on_topic(&SCRIPTS.replay_dead, &keys);
            inv.arg("oldest")
                .arg(DEAD_CHUNK)
                .arg(left_dead)
                .arg(&cutoff);
            let (replayed, stayed, at, dead_then): (usize, usize, u64, usize) =
                invoke(&self.conn, &keys, &inv).await?;
            // The first call fixes the cutoff and how many letters were dead at it.
            let budget = *budget.get_or_insert(dead_then);
            cutoff = at.to_string();
            replayed_total += replayed;
            left_dead += stayed;
            if replayed + stayed < DEAD_CHUNK || replayed_total + left_dead >= budget {
                return Ok(replayed_total);
            }
        }
    }

    /// Deletes every dead letter of `topic`; returns how many.
    pub async fn purge_dead(&self, topic: &str) -> Result<usize> {
        let keys = self.keys(topic)?;
        let mut total = 0;
        loop {
            let mut inv = on_topic(&SCRIPTS.purge_dead, &keys);
            inv.arg(DEAD_CHUNK);
            let n = invoke::<usize>(&self.conn, &keys, &inv).await?;
            total += n;
            if n < DEAD_CHUNK {
                return Ok(total);
            }
        }
    }
}
