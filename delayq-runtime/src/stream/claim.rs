//! One delivery's hold on a stream entry: the stream counterpart of `delay/claim.rs`. The entry
//! stays in the group's pending list under this consumer; renewing resets its idle time, so
//! that nobody takes it over while its handler runs.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use delayq_core::protocol::StreamGroup;
use delayq_core::{AckError, Error};
use tokio::time::Instant;

use crate::ack_batcher::{AckBatcher, AckSink};
use crate::books::{BookEntry, Books};
use crate::meter::{Meter, Outcome};
use crate::options::{ListenerOptions, RetryDelay};
use crate::settle::Settle;

/// A stream's acks go in batches, each one XACK.
impl AckSink for StreamGroup {
    type Item = Arc<str>;
    async fn ack_all(&self, items: Vec<Self::Item>) -> Result<Vec<bool>, Error> {
        self.ack(&items).await
    }
}

/// A stream's books: deliveries by entry id.
pub(crate) type StreamBooks = Books<Arc<str>>;

pub(crate) struct StreamClaim {
    entry: BookEntry<Arc<str>>,
    group: StreamGroup,
    acks: AckBatcher<StreamGroup>,
    meter: Arc<Meter>,
    pub(crate) id: Arc<str>,
    pub(crate) deliveries: u32,
    /// `max_attempts` is max_deliveries, `ack_timeout` is min_idle.
    options: ListenerOptions,
    /// Until when `Ack::extend` asked to keep the entry, when beyond one min_idle.
    hold_until: Mutex<Option<Instant>>,
    /// Itself, for the task that keeps a long hold.
    me: Weak<StreamClaim>,
}

impl StreamClaim {
    /// The claim of an entry just read or taken over, entered in `books`.
    pub(crate) fn enter(
        books: Arc<StreamBooks>,
        group: StreamGroup,
        acks: AckBatcher<StreamGroup>,
        meter: Arc<Meter>,
        options: ListenerOptions,
        id: Arc<str>,
        deliveries: u32,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| StreamClaim {
            me: me.clone(),
            entry: BookEntry::enter(books, id.clone()),
            group,
            acks,
            meter,
            id,
            deliveries,
            options,
            hold_until: Mutex::new(None),
        })
    }

    async fn renew(&self) -> Result<(), AckError> {
        let held = self.group.renew(std::slice::from_ref(&self.id)).await?;
        if held.first() == Some(&true) {
            Ok(())
        } else {
            self.entry.stale()
        }
    }

    /// Renews every third of min_idle until the hold `extend` asked for has passed, the entry
    /// is settled, or it is lost.
    async fn keep(self: Arc<Self>) {
        let every = self.options.ack_timeout() / 3;
        loop {
            tokio::time::sleep(every).await;
            let until = *self.hold_until.lock().unwrap_or_else(|p| p.into_inner());
            if self.is_settled() || until.is_none_or(|u| Instant::now() + every >= u) {
                return;
            }
            if let Err(AckError::Stale) = self.renew().await {
                return;
            }
        }
    }
}

impl Settle for StreamClaim {
    fn id(&self) -> &str {
        &self.id
    }

    fn attempt(&self) -> u32 {
        self.deliveries
    }

    fn is_settled(&self) -> bool {
        self.entry.is_settled()
    }

    fn leave_books(&self) {
        self.entry.leave();
    }

    async fn ack(&self) -> Result<(), AckError> {
        if self.acks.ack(self.id.clone()).await? {
            self.meter.handled(Outcome::Ok, 1);
            self.entry.settle();
            Ok(())
        } else {
            self.entry.stale()
        }
    }

    async fn nack(&self, error: &str, dead_reason: Option<&str>) -> Result<(), AckError> {
        let last = self.deliveries >= self.options.max_attempts;
        if dead_reason.is_some() || last {
            let reason = match dead_reason {
                Some(reason) => reason.to_string(),
                None => format!("max_deliveries reached; last error: {error}"),
            };
            if !self.group.dead_letter(&self.id, &reason).await? {
                return self.entry.stale();
            }
            tracing::warn!(error, reason, "moved to the dead-letter stream");
            self.meter.handled(Outcome::Dead, 1);
            self.meter.dead_dropped(self.group.take_dead_dropped());
        } else {
            let backoff = self.options.backoff.delay(self.deliveries);
            let min_idle = self.options.ack_timeout();
            if !self.group.retry_after(&self.id, backoff, min_idle).await? {
                return self.entry.stale();
            }
            tracing::debug!(retry_in = ?backoff.min(min_idle), "will be delivered again");
            self.meter.handled(Outcome::Retry, 1);
        }
        self.entry.settle();
        Ok(())
    }

    async fn retry_after(&self, after: Duration, note: &str) -> Result<(), AckError> {
        let min_idle = self.options.ack_timeout();
        if !self.group.later(&self.id, after, min_idle).await? {
            return self.entry.stale();
        }
        tracing::debug!(note, retry_in = ?after.min(min_idle), "will be delivered again (retry_after)");
        self.meter.handled(Outcome::Retry, 1);
        self.entry.settle();
        Ok(())
    }

    async fn extend(&self, by: Duration) -> Result<(), AckError> {
        self.renew().await?;
        let min_idle = self.options.ack_timeout();
        if by > min_idle {
            let until = Instant::now() + by;
            let start_keeper = {
                let mut hold = self.hold_until.lock().unwrap_or_else(|p| p.into_inner());
                let was = *hold;
                *hold = Some(was.map_or(until, |w| w.max(until)));
                was.is_none()
            };
            if let Some(me) = self.me.upgrade().filter(|_| start_keeper) {
                tokio::spawn(me.keep());
            }
        }
        Ok(())
    }
}
