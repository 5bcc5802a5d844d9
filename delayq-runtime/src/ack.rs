//! `Ack`, the manual-ack handle, for a topic's message or a stream's entry.

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::AckError;

use crate::lease::Lease;
use crate::settle::Settle;
use crate::stream_lease::StreamLease;

/// What an `Ack` settles.
pub(crate) enum Held {
    Message(Arc<Lease>),
    Entry(Arc<StreamLease>),
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
    pub(crate) held: Held,
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
    pub(crate) fn message(lease: Arc<Lease>) -> Self {
        Ack {
            held: Held::Message(lease),
        }
    }

    pub(crate) fn entry(lease: Arc<StreamLease>) -> Self {
        Ack {
            held: Held::Entry(lease),
        }
    }

    /// Done: the message is deleted (a stream entry: `XACK`).
    pub async fn ack(&self) -> Result<(), AckError> {
        match &self.held {
            Held::Message(l) => l.ack().await,
            Held::Entry(l) => l.ack().await,
        }
    }

    /// Failed: retry after the listener's backoff, or dead-letter it when this was its last
    /// attempt. `reason` is kept as the message's last error.
    pub async fn nack(&self, reason: impl Display) -> Result<(), AckError> {
        let reason = reason.to_string();
        match &self.held {
            Held::Message(l) => l.nack(&reason, None).await,
            Held::Entry(l) => l.nack(&reason, None).await,
        }
    }

    /// Pushes the ack deadline out to `by` from now (a stream entry: keeps it from being
    /// taken over for `by`). It never moves a deadline earlier, and the runtime's own lease
    /// renewals never shorten one you set: `extend(10 min)`, then hand the `Ack` to a
    /// background task that acks within those 10 minutes.
    pub async fn extend(&self, by: Duration) -> Result<(), AckError> {
        match &self.held {
            Held::Message(l) => l.extend(by).await,
            Held::Entry(l) => l.extend(by).await,
        }
    }

    /// Moves the message to the dead letters now, with `reason`.
    pub async fn dead_letter(&self, reason: impl Display) -> Result<(), AckError> {
        let reason = reason.to_string();
        match &self.held {
            Held::Message(l) => l.nack("", Some(&reason)).await,
            Held::Entry(l) => l.nack("", Some(&reason)).await,
        }
    }

    /// The id of the message (or stream entry) this handle settles.
    pub fn id(&self) -> &str {
        match &self.held {
            Held::Message(l) => l.id.as_str(),
            Held::Entry(l) => &l.id,
        }
    }

    /// Which delivery this is: 1 on the first.
    pub fn attempt(&self) -> u32 {
        match &self.held {
            Held::Message(l) => l.attempt,
            Held::Entry(l) => l.deliveries,
        }
    }
}
