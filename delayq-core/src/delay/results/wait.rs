//! [`Producer::wait`] and [`Producer::send_and_wait`]: a wait listens before it looks (so an
//! end between the two is heard), and always ends by its timeout.

use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;

use super::super::keys::TopicKeys;
use super::super::send_options::SendOptions;
use super::hub::{Hub, Waiter};
use super::outcome::{outcomes, Outcome, RawOutcome, Register, Unfinished};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;
use crate::time::millis;

impl Producer {
    /// The waits of this producer and its clones.
    pub(super) fn hub(&self) -> &Hub {
        let hub = self
            .waits
            .get_or_init(|| std::sync::Arc::new(Hub::new(self.conn.clone())));
        hub.downcast_ref::<Hub>()
            .expect("the producer's waits slot holds the waits' hub")
    }

    /// Registers a wait (see `Hub::register`), starting the subscriber task when none runs.
    fn register_wait(&self, keys: &Arc<TopicKeys>, id: &MessageId, armed: bool) -> Waiter {
        let (waiter, start) = self.hub().register(keys, id, armed);
        if start {
            tokio::spawn(super::subscriber::run(self.hub().clone()));
        }
        waiter
    }

    /// How many waits of this producer (and its clones) stand now, on how many topics.
    #[doc(hidden)]
    pub fn standing_waits(&self) -> (usize, usize) {
        self.waits
            .get()
            .and_then(|h| h.downcast_ref::<Hub>())
            .map_or((0, 0), Hub::counts)
    }

    /// Waits until message `id` of `topic` ends, at most `timeout`: its [`Outcome`] when it
    /// ended (`Done` with its handler's value, `Dead`, `Cancelled`), `Unknown` when nothing is
    /// known of it (never sent, or gone: purged, or ended without a kept outcome before the
    /// wait began), or `Pending` when the timeout passed first. It never waits past `timeout`.
    /// The waits of a producer share one subscriber connection (one a shard on a cluster).
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::ResultDecode`](crate::Error::ResultDecode) when the value is not a `T`;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn wait<T: DeserializeOwned>(
        &self,
        topic: &str,
        id: &MessageId,
        timeout: Duration,
    ) -> Result<Outcome<T>> {
        let keys = Arc::new(self.keys(topic)?);
        let deadline = deadline_after(timeout);
        let waiter = self.register_wait(&keys, id, true);
        let raw = self
            .wait_registered(&keys, id, waiter, deadline, Register::Pending, true)
            .await?;
        raw.decode(topic, id)
    }

    /// Sends `payload` to `topic`, due now, and waits at most `timeout` for its handler's
    /// value. The wait is registered before the send, so a handler faster than the caller is
    /// heard.
    ///
    /// # Errors
    /// [`Error::NotDone`](crate::Error::NotDone) when it ended otherwise (dead, cancelled,
    /// unknown), was still pending at the timeout, or was not sent (`NotSent`: the timeout
    /// passed before its end could be listened for); the errors of
    /// [`send_with`](Producer::send_with) and [`wait`](Producer::wait).
    pub async fn send_and_wait<P: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        topic: &str,
        payload: &P,
        timeout: Duration,
    ) -> Result<T> {
        self.send_with_and_wait(topic, payload, SendOptions::new(), timeout)
            .await
    }

    /// [`send_and_wait`](Producer::send_and_wait) with options (priority, key, delay,
    /// max_attempts...); with `.id(..)` the wait is for that id (a duplicate send waits for
    /// the pending message of that id).
    ///
    /// # Errors
    /// As [`send_and_wait`](Producer::send_and_wait).
    pub async fn send_with_and_wait<P: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        topic: &str,
        payload: &P,
        options: SendOptions,
        timeout: Duration,
    ) -> Result<T> {
        let keys = Arc::new(self.keys(topic)?);
        // Checked before anything is registered or written.
        self.encode(payload)?;
        let deadline = deadline_after(timeout);
        let id = match &options.id {
            Some(id) => MessageId::new(id.clone())?,
            None => MessageId::for_due(options.when.due()?.expected_unix_ms()),
        };
        let waiter = self.register_wait(&keys, &id, false);
        let not_sent = || Error::NotDone {
            topic: topic.to_string(),
            id: id.to_string(),
            outcome: Unfinished::NotSent,
        };
        // Listen, register, then send: the end of a run that beats us is announced to us.
        // Nothing is sent once the timeout has passed.
        if !self.hub().until_live(&keys.ended, deadline).await {
            return Err(not_sent());
        }
        let ahead = outcomes(
            &self.conn,
            &keys,
            Register::Ahead(left_ms(deadline)),
            std::slice::from_ref(&id),
        );
        match tokio::time::timeout_at(deadline, ahead).await {
            Ok(r) => drop(r?),
            Err(_) => return Err(not_sent()),
        }
        if Instant::now() >= deadline {
            return Err(not_sent());
        }
        let sent = self
            .send_with(topic, payload, options.id(id.as_str()))
            .await?;
        waiter.arm();
        // Unknown right after the send: it ended already, and its end, announced to this
        // registered wait, is on its way.
        let raw = self
            .wait_registered(&keys, sent.id(), waiter, deadline, Register::Pending, false)
            .await?;
        let unfinished = match raw {
            Outcome::Done(_) => {
                return raw.decode(topic, &id).map(|o| match o {
                    Outcome::Done(v) => v,
                    _ => unreachable!("decoded a done outcome"),
                })
            }
            Outcome::Dead { reason } => Unfinished::Dead(reason),
            Outcome::Cancelled => Unfinished::Cancelled,
            Outcome::Pending => Unfinished::TimedOut,
            Outcome::Unknown => Unfinished::Unknown,
        };
        Err(Error::NotDone {
            topic: topic.to_string(),
            id: id.to_string(),
            outcome: unfinished,
        })
    }

    /// A registered wait: subscribed, then looked, then heard (or looked once more at the
    /// deadline). `unknown_ends`: a look that finds nothing known of it answers.
    async fn wait_registered(
        &self,
        keys: &TopicKeys,
        id: &MessageId,
        mut waiter: Waiter,
        deadline: Instant,
        register: fn(u64) -> Register,
        unknown_ends: bool,
    ) -> Result<RawOutcome> {
        let one = std::slice::from_ref(id);
        let live = self.hub().until_live(&keys.ended, deadline).await;
        if live {
            if let Ok(heard) = waiter.answer.try_recv() {
                return Ok(heard);
            }
            let look = outcomes(&self.conn, keys, register(left_ms(deadline)), one);
            let now = match tokio::time::timeout_at(deadline, look).await {
                Ok(now) => now?,
                // The timeout passed during the look: one last read below.
                Err(_) => Vec::new(),
            };
            let ends = |o: &RawOutcome| match o {
                Outcome::Pending => false,
                Outcome::Unknown => unknown_ends,
                _ => true,
            };
            if let Some(now) = now.into_iter().next().filter(ends) {
                return Ok(now);
            }
            if let Ok(Ok(heard)) = tokio::time::timeout_at(deadline, &mut waiter.answer).await {
                return Ok(heard);
            }
        }
        drop(waiter);
        // The timeout passed (or no subscription came in time): how it stands now.
        let last = outcomes(&self.conn, keys, Register::No, one).await?;
        last.into_iter()
            .next()
            .ok_or_else(|| Error::unexpected("outcome", &"no answer"))
    }
}

/// The instant `timeout` from now (a timeout too long for the clock: some 30 years).
fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(30 * 365 * 86_400)))
        .unwrap_or(now)
}

/// Milliseconds until `deadline`, at least 1.
fn left_ms(deadline: Instant) -> u64 {
    millis(deadline.saturating_duration_since(Instant::now())).max(1)
}
