//! One delivery's hold on its message: its fence token, whether it has been settled, and the
//! calls that settle or extend it. The worker and the user's `Ack` share it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::{NackOutcome, TopicQueue};
use delayq_core::{AckError, MessageId};

use crate::ack_batcher::AckBatcher;
use crate::books::Books;
use crate::options::ListenerOptions;
use crate::settle::Settle;

/// A topic's books: deliveries by (id, token).
pub(crate) type TopicBooks = Books<(MessageId, u64)>;

pub(crate) struct Lease {
    books: Arc<TopicBooks>,
    queue: TopicQueue,
    acks: AckBatcher<TopicQueue>,
    pub(crate) id: MessageId,
    pub(crate) token: u64,
    pub(crate) attempt: u32,
    options: ListenerOptions,
    settled: Arc<AtomicBool>,
}

impl Lease {
    /// A lease for a delivery just claimed, entered in `books`.
    pub(crate) fn enter(
        books: Arc<TopicBooks>,
        queue: TopicQueue,
        acks: AckBatcher<TopicQueue>,
        options: ListenerOptions,
        id: MessageId,
        token: u64,
        attempt: u32,
    ) -> Arc<Self> {
        let settled = Arc::new(AtomicBool::new(false));
        books.enter((id.clone(), token), settled.clone());
        Arc::new(Lease {
            books,
            queue,
            acks,
            id,
            token,
            attempt,
            options,
            settled,
        })
    }

    /// Marks it settled and takes it off the books, so shutdown does not hand it back.
    fn mark_settled(&self) {
        self.settled.store(true, Ordering::Release);
        self.leave_books();
    }

    /// `Err(Stale)` for a stale answer, which also takes the delivery off the books.
    fn stale(&self) -> Result<(), AckError> {
        self.leave_books();
        Err(AckError::Stale)
    }
}

impl Settle for Lease {
    fn is_settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }

    /// Takes it off the books: it is settled, or another delivery owns the message now (a
    /// stale answer), so there is nothing this process could hand back.
    fn leave_books(&self) {
        self.books.remove(&(self.id.clone(), self.token));
    }

    async fn ack(&self) -> Result<(), AckError> {
        if self.acks.ack((self.id.clone(), self.token)).await? {
            self.mark_settled();
            Ok(())
        } else {
            self.stale()
        }
    }

    /// Retry after the listener's backoff, or dead when attempts are used up (or at once when
    /// `dead_reason` is given).
    async fn nack(&self, error: &str, dead_reason: Option<&str>) -> Result<(), AckError> {
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
                tracing::debug!(retry_in = ?backoff, "will retry");
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

    /// Pushes the ack deadline out to at least `lease` from now (never earlier).
    async fn extend(&self, lease: Duration) -> Result<(), AckError> {
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
