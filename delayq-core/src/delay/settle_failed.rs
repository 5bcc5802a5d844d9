//! A failed delivery settled: retried after a backoff or dead-lettered (`nack`), or handed
//! back for later without using an attempt (`retry_after`); one script, `nack.lua`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::buckets::{declaring, Buckets};
use super::queue::TopicQueue;
use super::scripts::{self, Failure};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::time::millis;

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

impl TopicQueue {
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
        let failure = self.failure(backoff, error, default_max_attempts, dead_reason);
        self.settle_failed(id, token, failure).await
    }

    /// As [`nack`](Self::nack) without a dead reason, for a run stopped at its listener's
    /// `timeout`: also counted as a timeout in the topic's outcome counters (`delayq stats`).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn nack_timed_out(
        &self,
        id: &MessageId,
        token: u64,
        backoff: Duration,
        error: &str,
        default_max_attempts: u32,
    ) -> Result<NackOutcome> {
        let failure = Failure {
            timed_out: true,
            ..self.failure(backoff, error, default_max_attempts, None)
        };
        self.settle_failed(id, token, failure).await
    }

    /// A failed run's arguments for `nack.lua`: retried after `backoff` (or dead-lettered).
    fn failure<'a>(
        &'a self,
        backoff: Duration,
        error: &'a str,
        default_max_attempts: u32,
        dead_reason: Option<&'a str>,
    ) -> Failure<'a> {
        Failure {
            backoff_ms: millis(backoff),
            error,
            default_max_attempts,
            dead_reason,
            later: false,
            timed_out: false,
            flow: &self.flow,
        }
    }

    /// Hands a delivery back to be claimed again after `after`, its attempt not counted
    /// (`Ack::retry_after`: the handler was told to come back later, an HTTP 429). `note` is
    /// kept as the message's last error. `Stale` when this delivery no longer owns it.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn retry_after(
        &self,
        id: &MessageId,
        token: u64,
        after: Duration,
        note: &str,
    ) -> Result<NackOutcome> {
        let failure = Failure {
            later: true,
            ..self.failure(after, note, 1, None)
        };
        self.settle_failed(id, token, failure).await
    }

    async fn settle_failed(
        &self,
        id: &MessageId,
        token: u64,
        mut failure: Failure<'_>,
    ) -> Result<NackOutcome> {
        let k = &self.keys;
        // A delay past the latest due time delayq stores (`retry_after(Duration::MAX)`) waits
        // until then.
        let now = crate::time::time_to_ms(std::time::SystemTime::now());
        failure.backoff_ms = failure
            .backoff_ms
            .min(crate::time::MAX_DUE_MS.saturating_sub(now));
        let due = now + failure.backoff_ms;
        let far = Buckets::default().due(k, due);
        let failure = &failure;
        let reply: String = declaring(&self.conn, k, far, |far| {
            scripts::nack(k, far, id, token, failure)
        })
        .await?;
        match reply.split_once(' ').unwrap_or((&reply, "")) {
            ("retry", _) => Ok(NackOutcome::Retry),
            ("dead", dropped) => {
                let dropped: u64 = dropped.parse().unwrap_or(0);
                self.dead_dropped.fetch_add(dropped, Ordering::Relaxed);
                Ok(NackOutcome::Dead)
            }
            ("stale", _) => Ok(NackOutcome::Stale),
            _ => Err(Error::unexpected("nack", &reply)),
        }
    }
}
