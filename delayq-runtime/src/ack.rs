//! `Ack`, the manual-ack handle, and the delivery state it shares with the worker.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use delayq_core::protocol::{NackOutcome, TopicQueue};
use delayq_core::{AckError, MessageId};

use crate::acks::AckSender;
use crate::registry::ListenerOptions;
use crate::topic::TopicRuntime;

/// One delivery of one message: what settling it needs, and whether it has been settled.
pub(crate) struct DeliveryState {
    pub(crate) topic: Weak<TopicRuntime>,
    pub(crate) queue: TopicQueue,
    acks: AckSender,
    pub(crate) id: MessageId,
    pub(crate) token: u64,
    pub(crate) attempt: u32,
    pub(crate) options: ListenerOptions,
    settled: AtomicBool,
}

impl DeliveryState {
    pub(crate) fn new(
        topic: &Arc<TopicRuntime>,
        id: MessageId,
        token: u64,
        attempt: u32,
    ) -> Arc<Self> {
        Arc::new(DeliveryState {
            topic: Arc::downgrade(topic),
            queue: topic.queue.clone(),
            acks: topic.acks.clone(),
            id,
            token,
            attempt,
            options: topic.options,
            settled: AtomicBool::new(false),
        })
    }

    pub(crate) fn is_settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }

    /// Marks it settled and forgets it, so shutdown does not hand it back.
    fn mark_settled(&self) {
        self.settled.store(true, Ordering::Release);
        self.forget();
    }

    /// Drops it from the topic's books: it is settled, or another delivery owns the message
    /// now (a stale answer), so there is nothing this process could hand back.
    fn forget(&self) {
        if let Some(topic) = self.topic.upgrade() {
            topic.forget(&self.id, self.token);
        }
    }

    /// `Err(Stale)` for a stale answer, which also takes the delivery off the books.
    fn stale(&self) -> Result<(), AckError> {
        self.forget();
        Err(AckError::Stale)
    }

    pub(crate) async fn ack(&self) -> Result<(), AckError> {
        if self.acks.ack(self.id.clone(), self.token).await? {
            self.mark_settled();
            Ok(())
        } else {
            self.stale()
        }
    }

    /// Retry after the listener's backoff, or dead when attempts are used up (or at once when
    /// `dead_reason` is given).
    pub(crate) async fn nack(
        &self,
        error: &str,
        dead_reason: Option<&str>,
    ) -> Result<(), AckError> {
        let backoff = self.options.backoff.delay(self.attempt);
        let outcome = self
            .queue
            .nack(
                &self.id,
                self.token,
                backoff,
                error,
                self.options.max_attempts,
                dead_reason,
            )
            .await?;
        match outcome {
            NackOutcome::Stale => self.stale(),
            NackOutcome::Retry => {
                tracing::debug!(retry_in_ms = backoff.as_millis() as u64, "will retry");
                self.mark_settled();
                Ok(())
            }
            NackOutcome::Dead => {
                tracing::warn!(
                    error,
                    reason = dead_reason.unwrap_or("max_attempts reached"),
                    "moved to the dead letters"
                );
                self.mark_settled();
                Ok(())
            }
        }
    }

    pub(crate) async fn extend(&self, lease: Duration) -> Result<(), AckError> {
        let extended = self
            .queue
            .extend(lease, &[(self.id.clone(), self.token)])
            .await?;
        if extended.first() == Some(&true) {
            Ok(())
        } else {
            self.stale()
        }
    }
}

/// Settles a delivery by hand. A listener gets one when its second parameter is `Ack`;
/// nothing is acked until it calls [`ack`](Ack::ack). Dropped without any call, the message
/// stays claimed until its ack deadline and is then delivered again.
///
/// Every method fails with [`AckError::Stale`] once this delivery no longer owns the message
/// (its deadline passed and it was delivered again, or it was already settled).
pub struct Ack {
    pub(crate) state: Arc<DeliveryState>,
}

impl std::fmt::Debug for Ack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ack")
            .field("id", &self.state.id)
            .field("attempt", &self.state.attempt)
            .field("settled", &self.state.is_settled())
            .finish()
    }
}

impl Ack {
    /// Done: the message is deleted.
    pub async fn ack(&self) -> Result<(), AckError> {
        self.state.ack().await
    }

    /// Failed: retry after the listener's backoff, or dead-letter it when this was its last
    /// attempt. `reason` is kept as the message's last error.
    pub async fn nack(&self, reason: impl Display) -> Result<(), AckError> {
        self.state.nack(&reason.to_string(), None).await
    }

    /// Pushes the ack deadline out to `by` from now. It never moves a deadline earlier, and
    /// the runtime's own lease renewals never shorten one you set: `extend(10 min)`, then
    /// hand the `Ack` to a background task that acks within those 10 minutes.
    pub async fn extend(&self, by: Duration) -> Result<(), AckError> {
        self.state.extend(by).await
    }

    /// Moves the message to the dead letters now, with `reason`.
    pub async fn dead_letter(&self, reason: impl Display) -> Result<(), AckError> {
        let reason = reason.to_string();
        self.state.nack("", Some(&reason)).await
    }

    /// The id of the message this handle settles.
    pub fn id(&self) -> &MessageId {
        &self.state.id
    }

    /// Which delivery this is: 1 on the first.
    pub fn attempt(&self) -> u32 {
        self.state.attempt
    }
}
