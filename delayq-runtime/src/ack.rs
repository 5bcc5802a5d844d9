//! `Ack`, the manual-ack handle, for a topic's message or a stream's entry.

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::AckError;

use crate::settle::Settle;

type Settling<'a> = Pin<Box<dyn Future<Output = Result<(), AckError>> + Send + 'a>>;

/// What an `Ack` settles: [`Settle`] made object-safe, so that one `Ack` type serves every
/// system's deliveries (boxing only the calls a handler makes by hand).
trait Held: Send + Sync + 'static {
    fn id(&self) -> &str;
    fn attempt(&self) -> u32;
    fn ack(&self) -> Settling<'_>;
    fn ack_keeping<'a>(&'a self, value: &'a [u8]) -> Settling<'a>;
    fn nack<'a>(&'a self, error: &'a str, dead_reason: Option<&'a str>) -> Settling<'a>;
    fn extend(&self, by: Duration) -> Settling<'_>;
    fn retry_after<'a>(&'a self, after: Duration, note: &'a str) -> Settling<'a>;
}

impl<S: Settle> Held for S {
    fn id(&self) -> &str {
        Settle::id(self)
    }

    fn attempt(&self) -> u32 {
        Settle::attempt(self)
    }

    fn ack(&self) -> Settling<'_> {
        Box::pin(Settle::ack(self))
    }

    fn nack<'a>(&'a self, error: &'a str, dead_reason: Option<&'a str>) -> Settling<'a> {
        Box::pin(Settle::nack(self, error, dead_reason))
    }

    fn ack_keeping<'a>(&'a self, value: &'a [u8]) -> Settling<'a> {
        Box::pin(Settle::ack_keeping(self, value))
    }

    fn extend(&self, by: Duration) -> Settling<'_> {
        Box::pin(Settle::extend(self, by))
    }

    fn retry_after<'a>(&'a self, after: Duration, note: &'a str) -> Settling<'a> {
        Box::pin(Settle::retry_after(self, after, note))
    }
}

/// Settles a delivery by hand. A listener gets one when its second parameter is `Ack`;
/// nothing is acked until it calls [`ack`](Ack::ack). Dropped without any call, the message
/// stays claimed until its ack deadline (a stream entry: until it has been idle for
/// `min_idle`) and is then delivered again.
///
/// Every method fails with [`AckError::Stale`] once this delivery no longer owns the message
/// (its deadline passed and it was delivered again, or it was already settled). For a stream
/// entry, `ack` succeeds while the entry is pending in the group, whoever holds it: it was
/// handled.
pub struct Ack {
    held: Arc<dyn Held>,
}

impl std::fmt::Debug for Ack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ack")
            .field("id", &self.id())
            .field("attempt", &self.attempt())
            .finish()
    }
}

impl Ack {
    /// The handle of the delivery `claim` holds.
    pub(crate) fn new(claim: Arc<impl Settle>) -> Self {
        Ack { held: claim }
    }

    /// Done: the message is deleted (a stream entry: `XACK`).
    ///
    /// # Errors
    /// [`AckError::Stale`] when this delivery no longer owns the message (it timed out and was
    /// delivered again); [`AckError::Failed`] when Redis does not answer.
    pub async fn ack(&self) -> Result<(), AckError> {
        self.held.ack().await
    }

    /// Done, keeping `value` as the message's result for the listener's `result_ttl` (what
    /// `Producer::result` and `Producer::wait` answer), in the same step as the ack. A stream
    /// entry keeps no result: it is acked, and the value is dropped.
    ///
    /// # Errors
    /// As [`ack`](Self::ack); [`AckError::Failed`] with `Error::Encode` when `value` does not
    /// encode as JSON (nothing is changed).
    pub async fn ack_with<T: serde::Serialize + ?Sized>(&self, value: &T) -> Result<(), AckError> {
        let json = serde_json::to_vec(value).map_err(delayq_core::Error::from)?;
        self.held.ack_keeping(&json).await
    }

    /// Failed: retry after the listener's backoff, or dead-letter it when this was its last
    /// attempt. `reason` is kept as the message's last error.
    ///
    /// # Errors
    /// As [`ack`](Self::ack).
    pub async fn nack(&self, reason: impl Display) -> Result<(), AckError> {
        let reason = reason.to_string();
        self.held.nack(&reason, None).await
    }

    /// Pushes the ack deadline out to `by` from now (a stream entry: keeps it from being
    /// taken over for `by`). It never moves a deadline earlier, and the runtime's own lease
    /// renewals never shorten one you set: `extend(10 min)`, then hand the `Ack` to a
    /// background task that acks within those 10 minutes.
    ///
    /// # Errors
    /// As [`ack`](Self::ack).
    pub async fn extend(&self, by: Duration) -> Result<(), AckError> {
        self.held.extend(by).await
    }

    /// Not now: the message comes back after `after` without using an attempt (HTTP 429 with
    /// its `Retry-After`; a rate limit another service keeps). Its last error says
    /// `retry after <after>`. A stream entry comes back after `after` or the listener's
    /// `min_idle`, whichever is shorter, its delivery not counted either.
    ///
    /// # Errors
    /// As [`ack`](Self::ack).
    pub async fn retry_after(&self, after: Duration) -> Result<(), AckError> {
        let note = format!(
            "retry after {}",
            delayq_core::config::format_duration(after)
        );
        self.held.retry_after(after, &note).await
    }

    /// Moves the message to the dead letters now, with `reason`.
    ///
    /// # Errors
    /// As [`ack`](Self::ack).
    pub async fn dead_letter(&self, reason: impl Display) -> Result<(), AckError> {
        let reason = reason.to_string();
        self.held.nack("", Some(&reason)).await
    }

    /// The id of the message (or stream entry) this handle settles.
    pub fn id(&self) -> &str {
        self.held.id()
    }

    /// Which delivery this is: 1 on the first.
    pub fn attempt(&self) -> u32 {
        self.held.attempt()
    }
}
