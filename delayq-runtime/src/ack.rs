//! `Ack`, the manual-ack handle.

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::{AckError, MessageId};

use crate::lease::Lease;

/// Settles a delivery by hand. A listener gets one when its second parameter is `Ack`;
/// nothing is acked until it calls [`ack`](Ack::ack). Dropped without any call, the message
/// stays claimed until its ack deadline and is then delivered again.
///
/// Every method fails with [`AckError::Stale`] once this delivery no longer owns the message
/// (its deadline passed and it was delivered again, or it was already settled).
pub struct Ack {
    pub(crate) lease: Arc<Lease>,
}

impl std::fmt::Debug for Ack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ack")
            .field("id", &self.lease.id)
            .field("attempt", &self.lease.attempt)
            .field("settled", &self.lease.is_settled())
            .finish()
    }
}

impl Ack {
    /// Done: the message is deleted.
    pub async fn ack(&self) -> Result<(), AckError> {
        self.lease.ack().await
    }

    /// Failed: retry after the listener's backoff, or dead-letter it when this was its last
    /// attempt. `reason` is kept as the message's last error.
    pub async fn nack(&self, reason: impl Display) -> Result<(), AckError> {
        self.lease.nack(&reason.to_string(), None).await
    }

    /// Pushes the ack deadline out to `by` from now. It never moves a deadline earlier, and
    /// the runtime's own lease renewals never shorten one you set: `extend(10 min)`, then
    /// hand the `Ack` to a background task that acks within those 10 minutes.
    pub async fn extend(&self, by: Duration) -> Result<(), AckError> {
        self.lease.extend(by).await
    }

    /// Moves the message to the dead letters now, with `reason`.
    pub async fn dead_letter(&self, reason: impl Display) -> Result<(), AckError> {
        let reason = reason.to_string();
        self.lease.nack("", Some(&reason)).await
    }

    /// The id of the message this handle settles.
    pub fn id(&self) -> &MessageId {
        &self.lease.id
    }

    /// Which delivery this is: 1 on the first.
    pub fn attempt(&self) -> u32 {
        self.lease.attempt
    }
}
