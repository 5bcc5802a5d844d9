//! One delivery's hold on its message: its fence token, whether it has been settled, and the
//! calls that settle or extend it. The worker and the user's `Ack` share it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq_core::protocol::{Delivery, NackOutcome, Receipt, TopicQueue};
use delayq_core::{AckError, Error, MessageId};
use tokio::sync::OwnedSemaphorePermit;

use super::ends::EndBatchers;
use crate::ack_batcher::{AckBatcher, AckSink};
use crate::books::{BookEntry, Books};
use crate::meter::{Meter, Minute, Outcome};
use crate::options::{ListenerOptions, RetryDelay};
use crate::settle::Settle;

/// A topic's acks go in batches (`ack.lua`, fenced per delivery by its token).
impl AckSink for TopicQueue {
    type Item = Receipt;
    async fn ack_all(&self, items: Vec<Self::Item>) -> Result<Vec<bool>, Error> {
        self.ack(&items).await
    }
}

/// A topic's books: deliveries by (id, token).
pub(crate) type TopicBooks = Books<(MessageId, u64)>;

/// One delivery's hold on its message.
pub(crate) struct Claim {
    entry: BookEntry<(MessageId, u64)>,
    queue: TopicQueue,
    acks: AckBatcher<TopicQueue>,
    /// Where acks keeping a value and flow steps' settles go.
    ends: EndBatchers,
    meter: Arc<Meter>,
    /// A schedule's tick: counted for the schedule's history too.
    tick: Option<Arc<Minute>>,
    pub(crate) id: MessageId,
    pub(crate) token: u64,
    pub(crate) attempt: u32,
    /// Its `dedup_for` window (ms, 0 for none): the ack reserves the id for it.
    dedup_ms: u64,
    /// A flow step's message: its ack notes the end for its flow (keeping the value, when its
    /// handler returns one), which is then settled (workflow/ in delayq-core).
    step: bool,
    options: ListenerOptions,
    /// The run's worker slot, until the run ends or the worker's ack takes it along (see
    /// `ack_batcher.rs`).
    slot: Mutex<Option<OwnedSemaphorePermit>>,
}

impl Claim {
    /// The claim of a delivery just claimed, entered in `books`.
    pub(crate) fn enter(
        books: Arc<TopicBooks>,
        queue: TopicQueue,
        (acks, ends): (AckBatcher<TopicQueue>, EndBatchers),
        (meter, tick): (Arc<Meter>, Option<Arc<Minute>>),
        options: ListenerOptions,
        (delivery, slot): (&Delivery, OwnedSemaphorePermit),
    ) -> Arc<Self> {
        let (id, token) = (delivery.id.clone(), delivery.token());
        Arc::new(Claim {
            entry: BookEntry::enter(books, (id.clone(), token)),
            queue,
            acks,
            ends,
            meter,
            tick,
            id,
            token,
            attempt: delivery.envelope.attempt,
            dedup_ms: delivery.envelope.dedup_ms,
            step: delayq_core::is_step_id(delivery.id.as_str()),
            options,
            slot: Mutex::new(Some(slot)),
        })
    }

    /// The run is over: its slot is free (unless its ack took it along).
    pub(crate) fn free_slot(&self) {
        drop(self.take_slot());
    }

    fn take_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Acks, the slot going along when given (`Some` rides on the boss's next claim). After
    /// an error the slot is the run's again: it holds it while it retries.
    async fn ack_with(&self, slot: Option<OwnedSemaphorePermit>) -> Result<(), AckError> {
        let receipt = (self.id.clone(), self.token, self.dedup_ms);
        let (answer, back) = self.acks.ack_lending(receipt, slot).await;
        if back.is_some() {
            *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = back;
        }
        if answer? {
            self.handled(Outcome::Ok);
            self.entry.settle();
            // A plain ack: its handler returned nothing (a value goes by `ack_keeping`).
            self.settle_step(delayq_core::StepEnd::Empty);
            Ok(())
        } else {
            self.entry.stale()
        }
    }

    /// A flow step's message ended: its flow is settled in the background, with the other
    /// steps that ended meanwhile (what fails is left to the back pool's sweep, which settles
    /// every noted end).
    fn settle_step(&self, end: delayq_core::StepEnd) {
        if !self.step {
            return;
        }
        let (settles, id) = (self.ends.settles.clone(), self.id.clone());
        tokio::spawn(async move {
            if let Err(e) = settles.ack((id, end)).await {
                tracing::warn!(error = %e, "a flow step's end is not settled yet; the back pool's sweep will")
            }
        });
    }

    /// Counts a settled run for the topic (and the schedule, for a tick).
    fn handled(&self, outcome: Outcome) {
        self.meter.handled(outcome, 1);
        if let Some(t) = &self.tick {
            t.handled(outcome, 1);
        }
    }

    /// The schedule's count, for a tick.
    pub(crate) fn tick(&self) -> Option<&Arc<Minute>> {
        self.tick.as_ref()
    }

    /// A failed run settled: retried after the listener's backoff or dead-lettered (see
    /// `nack`); `timed_out` when the run was stopped at the listener's `timeout`.
    async fn fail(
        &self,
        error: &str,
        dead_reason: Option<&str>,
        timed_out: bool,
    ) -> Result<(), AckError> {
        let backoff = self.options.backoff.delay(self.attempt);
        let (id, token, max) = (&self.id, self.token, self.options.max_attempts);
        let outcome = if timed_out {
            self.queue
                .nack_timed_out(id, token, backoff, error, max)
                .await?
        } else {
            self.queue
                .nack(id, token, backoff, error, max, dead_reason)
                .await?
        };
        match outcome {
            NackOutcome::Stale => self.entry.stale(),
            NackOutcome::Retry => {
                tracing::debug!(
                    retry_in = %delayq_core::config::format_duration(backoff),
                    "will retry"
                );
                self.handled(Outcome::Retry);
                self.entry.settle();
                Ok(())
            }
            NackOutcome::Dead => {
                let reason = dead_reason.unwrap_or(error);
                self.settle_step(delayq_core::StepEnd::Failed(reason.to_string()));
                tracing::warn!(
                    error,
                    reason = dead_reason.unwrap_or("max_attempts reached"),
                    "moved to the dead letters"
                );
                self.handled(Outcome::Dead);
                self.meter.dead_dropped(self.queue.take_dead_dropped());
                self.entry.settle();
                Ok(())
            }
        }
    }
}

impl Settle for Claim {
    fn id(&self) -> &str {
        self.id.as_str()
    }

    fn attempt(&self) -> u32 {
        self.attempt
    }

    fn is_settled(&self) -> bool {
        self.entry.is_settled()
    }

    fn leave_books(&self) {
        self.entry.leave();
    }

    async fn ack(&self) -> Result<(), AckError> {
        self.ack_with(None).await
    }

    /// The handler returned: its slot goes with the ack.
    async fn ack_after_run(&self) -> Result<(), AckError> {
        self.ack_with(self.take_slot()).await
    }

    /// Keeps the value with the ack (`ack_keep.lua`, in batches of their own: they do not
    /// ride on a claim).
    async fn ack_keeping(&self, value: &[u8]) -> Result<(), AckError> {
        let receipt = (self.id.clone(), self.token, self.dedup_ms);
        if self.ends.keeps.ack((receipt, value.to_vec())).await? {
            self.handled(Outcome::Ok);
            self.entry.settle();
            self.settle_step(delayq_core::StepEnd::Done);
            Ok(())
        } else {
            self.entry.stale()
        }
    }

    /// Retry after the listener's backoff, or dead when attempts are used up (or at once when
    /// `dead_reason` is given).
    async fn nack(&self, error: &str, dead_reason: Option<&str>) -> Result<(), AckError> {
        self.fail(error, dead_reason, false).await
    }

    async fn timed_out(&self, error: &str) -> Result<(), AckError> {
        self.fail(error, None, true).await
    }

    /// Back after `after`, the attempt handed back.
    async fn retry_after(&self, after: Duration, note: &str) -> Result<(), AckError> {
        match self
            .queue
            .retry_after(&self.id, self.token, after, note)
            .await?
        {
            NackOutcome::Stale => self.entry.stale(),
            _ => {
                tracing::debug!(
                    retry_in = %delayq_core::config::format_duration(after),
                    "will be delivered again (retry_after; the attempt does not count)"
                );
                self.handled(Outcome::Retry);
                self.entry.settle();
                Ok(())
            }
        }
    }

    /// Pushes the ack deadline out to at least `by` from now (never earlier).
    async fn extend(&self, by: Duration) -> Result<(), AckError> {
        let extended = self
            .queue
            .extend(by, &[(self.id.clone(), self.token)])
            .await?;
        if extended.first() == Some(&true) {
            Ok(())
        } else {
            self.entry.stale()
        }
    }
}
