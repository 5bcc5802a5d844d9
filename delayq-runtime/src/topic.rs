//! One listener's topic at run time: its boss (claims due messages when worker slots are
//! free) and its back pool (re-delivers claims whose ack deadline passed). Both sleep until
//! the next known due time or deadline, or until a wake-up arrives over pub/sub.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq_core::protocol::{TopicQueue, MAX_CLAIM_BATCH};
use delayq_core::MessageId;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::ack::DeliveryState;
use crate::acks::AckSender;
use crate::handler::ErasedHandler;
use crate::health::{Health, RetryDelay};
use crate::registry::{ListenerOptions, ListenerRegistration};
use crate::worker;

/// How long a boss with nothing due sleeps before looking again, in case a wake-up was lost.
pub(crate) const BOSS_SAFETY_SLEEP: Duration = Duration::from_secs(300);
/// How often the back pool looks for expired claims when it knows of none (claims by other
/// processes are announced over pub/sub; this covers announcements lost in a disconnect).
pub(crate) const BACK_SAFETY_SWEEP: Duration = Duration::from_secs(120);
/// The last part of a boss's sleep to a due time, slept precisely (see `sleep_to_due`).
const PRECISE_TAIL: Duration = Duration::from_millis(3);
/// Expired claims handled per script call.
const REQUEUE_BATCH: usize = 1_000;

pub(crate) struct TopicRuntime {
    pub(crate) name: Arc<str>,
    pub(crate) registration: &'static ListenerRegistration,
    pub(crate) options: ListenerOptions,
    pub(crate) handler: Arc<dyn ErasedHandler>,
    pub(crate) queue: TopicQueue,
    pub(crate) acks: AckSender,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) wake_boss: Notify,
    pub(crate) wake_back: Notify,
    /// Deliveries claimed here and not yet settled, handed back at shutdown.
    claims: Mutex<HashMap<(MessageId, u64), Arc<DeliveryState>>>,
    /// Cancelled when the runtime stops claiming.
    pub(crate) stop: CancellationToken,
    /// Cancelled when the shutdown grace is over: running handlers are aborted.
    pub(crate) abort: CancellationToken,
    pub(crate) health: Health,
}

impl TopicRuntime {
    pub(crate) fn new(
        registration: &'static ListenerRegistration,
        queue: TopicQueue,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> Arc<Self> {
        Arc::new(TopicRuntime {
            name: registration.topic.into(),
            registration,
            options: registration.options,
            handler: (registration.handler)(),
            acks: AckSender::spawn(queue.clone()),
            queue,
            slots: Arc::new(Semaphore::new(registration.options.concurrency as usize)),
            wake_boss: Notify::new(),
            wake_back: Notify::new(),
            claims: Mutex::new(HashMap::new()),
            stop,
            abort,
            health: Health::new(format!("topic {}", registration.topic)),
        })
    }

    fn claims(&self) -> std::sync::MutexGuard<'_, HashMap<(MessageId, u64), Arc<DeliveryState>>> {
        // A panic while holding this lock cannot leave the map half-updated.
        self.claims.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn remember(&self, state: &Arc<DeliveryState>) {
        self.claims()
            .insert((state.id.clone(), state.token), state.clone());
    }

    pub(crate) fn forget(&self, id: &MessageId, token: u64) {
        self.claims().remove(&(id.clone(), token));
    }

    /// How many deliveries are on the books.
    pub(crate) fn tracked_claims(&self) -> usize {
        self.claims().len()
    }

    /// Every unsettled delivery claimed here, removed from the books.
    pub(crate) fn take_unsettled(&self) -> Vec<(MessageId, u64)> {
        self.claims()
            .drain()
            .filter(|(_, s)| !s.is_settled())
            .map(|(key, _)| key)
            .collect()
    }

    /// The boss's sleep until the next due time. tokio's timer wakes up to a millisecond or two
    /// late, so the last few milliseconds are slept on a blocking-pool thread, whose sleep is
    /// precise to tens of microseconds. Wake-ups still interrupt the long part.
    async fn sleep_to_due(&self, deadline: Instant) {
        if let Some(coarse) = deadline.checked_sub(PRECISE_TAIL) {
            if coarse > Instant::now() {
                tokio::select! {
                    _ = tokio::time::sleep_until(coarse) => {}
                    _ = self.wake_boss.notified() => return,
                    _ = self.stop.cancelled() => return,
                }
            }
        }
        let tail = deadline.saturating_duration_since(Instant::now());
        if !tail.is_zero() {
            let _ = tokio::task::spawn_blocking(move || std::thread::sleep(tail)).await;
        }
    }

    /// Sleeps for `d`, or until `notify` fires or the runtime stops claiming.
    async fn pause(&self, d: Duration, notify: &Notify) {
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = notify.notified() => {}
            _ = self.stop.cancelled() => {}
        }
    }

    /// The boss: waits for a free slot, claims as many due messages as there are free slots,
    /// starts a worker for each, and sleeps until the next due time when nothing is due.
    pub(crate) async fn run_boss(self: Arc<Self>) {
        let mut retry = RetryDelay::new();
        let lease = self.options.ack_timeout();
        while !self.stop.is_cancelled() {
            let first = tokio::select! {
                permit = self.slots.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => return,
                },
                _ = self.stop.cancelled() => return,
            };
            let mut permits: Vec<OwnedSemaphorePermit> = vec![first];
            while permits.len() < MAX_CLAIM_BATCH {
                match self.slots.clone().try_acquire_owned() {
                    Ok(p) => permits.push(p),
                    Err(_) => break,
                }
            }
            let asked = permits.len();
            let sent = Instant::now();
            let result = self.queue.claim_due(asked, lease).await;
            let replied = Instant::now();
            let batch = match result {
                Ok(batch) => {
                    self.health.ok();
                    retry.reset();
                    batch
                }
                Err(e) => {
                    self.health.failed(&e);
                    drop(permits);
                    let d = retry.next_delay();
                    self.pause(d, &self.wake_boss).await;
                    continue;
                }
            };
            for (id, why) in &batch.undeliverable {
                tracing::error!(topic = %self.name, %id, reason = %why, "claimed a message that cannot be delivered");
            }
            let got = batch.claimed.len() + batch.undeliverable.len();
            for claimed in batch.claimed {
                let permit = permits.pop().expect("one slot per claimed message");
                // WARN level, so the topic and id stay on the warnings a handler run can log
                // even when a service filters out INFO.
                let span = tracing::warn_span!(
                    "delayq.handle",
                    topic = %self.name,
                    id = %claimed.id,
                    attempt = claimed.envelope.attempt
                );
                tokio::spawn(worker::run(self.clone(), claimed, permit).instrument(span));
            }
            drop(permits);
            if got == asked {
                continue; // more may be due right now
            }
            let deadline = match batch.next_due_ms {
                // Redis ran the claim about half a round trip before the reply arrived.
                Some(due) => {
                    let remaining =
                        Duration::from_micros((due * 1000).saturating_sub(batch.now_us));
                    let since_claim = replied.duration_since(sent) / 2;
                    replied + remaining.saturating_sub(since_claim).min(BOSS_SAFETY_SLEEP)
                }
                None => replied + BOSS_SAFETY_SLEEP,
            };
            self.sleep_to_due(deadline).await;
        }
    }

    /// The back pool: moves expired claims (of any process) back to `delayed`, then sleeps
    /// until the earliest ack deadline in flight.
    pub(crate) async fn run_back(self: Arc<Self>) {
        let mut retry = RetryDelay::new();
        while !self.stop.is_cancelled() {
            let wait = match self
                .queue
                .requeue_expired(REQUEUE_BATCH, self.options.max_attempts)
                .await
            {
                Ok(report) => {
                    self.health.ok();
                    retry.reset();
                    if report.requeued + report.dead > 0 {
                        tracing::info!(
                            topic = %self.name,
                            requeued = report.requeued,
                            dead = report.dead,
                            "claims passed their ack deadline"
                        );
                    }
                    if report.requeued > 0 {
                        self.wake_boss.notify_one();
                    }
                    if report.requeued + report.dead == REQUEUE_BATCH {
                        continue;
                    }
                    match report.next_deadline_ms {
                        // A few ms past the deadline, so the claim has surely expired.
                        Some(at) => Duration::from_millis(at.saturating_sub(report.now_ms) + 5),
                        None => BACK_SAFETY_SWEEP,
                    }
                }
                Err(e) => {
                    self.health.failed(&e);
                    retry.next_delay()
                }
            };
            self.pause(wait.min(BACK_SAFETY_SWEEP), &self.wake_back)
                .await;
        }
    }
}
