//! One listener's topic at run time: what its boss, back pool and workers share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::{ms_to_time, Delivery, TopicQueue};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::claim::{Claim, TopicBooks};
use super::ends::EndBatchers;
use super::message::TopicDelivery;
use super::registration::ListenerRegistration;
use crate::ack::Ack;
use crate::ack_batcher::AckBatcher;
use crate::handler::ErasedHandler;
use crate::health::Health;
use crate::meter::{Meter, Minute};
use crate::options::ListenerOptions;
use crate::worker::{drive, RunContext, Running};

pub(crate) struct TopicRuntime {
    pub(crate) name: Arc<str>,
    pub(crate) registration: &'static ListenerRegistration,
    pub(crate) options: ListenerOptions,
    pub(crate) handler: Arc<dyn ErasedHandler<TopicDelivery>>,
    pub(crate) queue: TopicQueue,
    pub(crate) acks: AckBatcher<TopicQueue>,
    /// Acks that keep a value, and flow steps' settles, in batches of their own.
    pub(crate) ends: EndBatchers,
    /// Free worker slots: the boss claims no more than it can start.
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) wake_boss: Notify,
    /// Wakes the boss even while it waits on the rate limit (time travel, a resubscription).
    pub(crate) rouse: Notify,
    pub(crate) wake_back: Notify,
    /// What the last wake-ups of the back pool asked for: the earliest ack deadline announced
    /// (Redis ms), 0 for "look now", `u64::MAX` for nothing (see [`back_at`](Self::back_at)).
    back_wanted: AtomicU64,
    /// A claim (in any process) took what was due: [`claimed_next`](Self::claimed_next).
    pub(crate) claimed: Notify,
    /// The last announcement: (when to look next, ms or -1; the claim's time, µs).
    claimed_next: std::sync::Mutex<(i64, u64)>,
    /// Deliveries claimed here and not yet settled, handed back at shutdown.
    pub(crate) books: Arc<TopicBooks>,
    /// Messages the boss's claim calls on their way asked for: a shutdown that ends the boss
    /// before they answer cannot hand back what they took, and counts them as not returned.
    pub(crate) claims_on_way: AtomicUsize,
    /// Its runs. A run's ack lends its slot (to the boss's next claim or the ack call), free
    /// once the ack is answered, before the run has counted it: the shutdown waits for every
    /// slot, then for every run to end, before it writes the last history.
    pub(crate) runs: TaskTracker,
    /// Cancelled when the runtime stops claiming.
    pub(crate) stop: CancellationToken,
    /// Cancelled when the shutdown grace is over: running handlers are aborted.
    pub(crate) abort: CancellationToken,
    pub(crate) health: Health,
    pub(crate) meter: Arc<Meter>,
    /// What its schedules' ticks came to this minute, by schedule (see `tick_minute`).
    pub(crate) ticks: std::sync::Mutex<HashMap<Arc<str>, Arc<Minute>>>,
}

/// Schedules whose ticks one topic counts at most in a minute: the names come from message
/// ids (`name@time`), which anyone who sends can choose, so their number is bounded.
const TICK_NAMES_PER_MINUTE: usize = 1_000;

impl TopicRuntime {
    /// Wakes the boss to look now, even while it waits on the rate limit.
    pub(crate) fn rouse_boss(&self) {
        self.wake_boss.notify_one();
        self.rouse.notify_one();
    }

    /// Wakes the back pool to look now.
    pub(crate) fn wake_back_now(&self) {
        self.back_wanted.store(0, Ordering::Relaxed);
        self.wake_back.notify_one();
    }

    /// Tells the back pool that a claim with ack deadline `deadline_ms` (Redis' clock) landed
    /// in an empty `inflight`: it need look only then, unless it looks earlier anyway. So a
    /// claim in one process costs the other processes' back pools nothing until its deadline
    /// (by when it is usually settled).
    pub(crate) fn wake_back_at(&self, deadline_ms: u64) {
        self.back_wanted.fetch_min(deadline_ms, Ordering::Relaxed);
        self.wake_back.notify_one();
    }

    /// A claim made at `at_us` (Redis µs) took all that was due; the next look is at
    /// `next_ms` (Redis ms, -1: nothing waits).
    pub(crate) fn announce_claimed(&self, next_ms: i64, at_us: u64) {
        *self.claimed_next.lock().unwrap_or_else(|p| p.into_inner()) = (next_ms, at_us);
        self.claimed.notify_one();
    }

    /// The last announcement: (when to look next, ms, `None` when nothing waits; the claim's
    /// time, µs).
    pub(crate) fn claimed_next(&self) -> (Option<u64>, u64) {
        let (next, at) = *self.claimed_next.lock().unwrap_or_else(|p| p.into_inner());
        (u64::try_from(next).ok(), at)
    }

    /// What the wake-ups since the last call asked for: `None` to look now, or the earliest
    /// deadline announced.
    pub(crate) fn back_at(&self) -> Option<u64> {
        match self.back_wanted.swap(u64::MAX, Ordering::Relaxed) {
            0 | u64::MAX => None,
            at => Some(at),
        }
    }

    pub(crate) fn new(
        registration: &'static ListenerRegistration,
        options: ListenerOptions,
        queue: TopicQueue,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> Arc<Self> {
        Arc::new(TopicRuntime {
            name: registration.topic.into(),
            registration,
            options,
            handler: (registration.handler)(),
            acks: AckBatcher::spawn(queue.clone()),
            ends: EndBatchers::spawn(&queue),
            queue,
            slots: Arc::new(Semaphore::new(options.concurrency as usize)),
            wake_boss: Notify::new(),
            rouse: Notify::new(),
            wake_back: Notify::new(),
            back_wanted: AtomicU64::new(u64::MAX),
            claimed: Notify::new(),
            claimed_next: std::sync::Mutex::new((-1, 0)),
            books: Arc::default(),
            claims_on_way: AtomicUsize::new(0),
            runs: TaskTracker::new(),
            stop,
            abort,
            health: Health::new(format!("topic {}", registration.topic)),
            meter: Arc::new(Meter::topic(registration.topic)),
            ticks: std::sync::Mutex::default(),
        })
    }

    /// The claim of a delivery just claimed, run on `slot`, entered in the books.
    pub(crate) fn enter_claim(
        &self,
        delivery: &Delivery,
        slot: OwnedSemaphorePermit,
    ) -> Arc<Claim> {
        Claim::enter(
            self.books.clone(),
            self.queue.clone(),
            (self.acks.clone(), self.ends.clone()),
            (self.meter.clone(), self.tick_minute(delivery.id.as_str())),
            self.options,
            (delivery, slot),
        )
    }

    /// Where a schedule's tick (an id `name@time`) is counted for the schedule's history
    /// besides the topic's; `None` for other messages. The history writer takes the names
    /// each minute and writes only those that are schedules of this topic.
    fn tick_minute(&self, id: &str) -> Option<Arc<Minute>> {
        delayq_core::protocol::tick_time(id)?;
        let (name, _) = id.rsplit_once('@')?;
        let mut ticks = self.ticks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = ticks.get(name) {
            return Some(m.clone());
        }
        if ticks.len() >= TICK_NAMES_PER_MINUTE {
            return None;
        }
        let m = Arc::new(Minute::default());
        ticks.insert(name.into(), m.clone());
        Some(m)
    }

    /// Sleeps for `d`, or until `notify` fires or the runtime stops claiming.
    pub(crate) async fn pause(&self, d: Duration, notify: &Notify) {
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = notify.notified() => {}
            _ = self.stop.cancelled() => {}
        }
    }
}

/// Runs a topic's claimed message (`inbound`, built by the caller: an argument of an async fn
/// stays in its future for the whole run, so the delivery is taken once, in its final form).
pub(crate) async fn run(
    topic: Arc<TopicRuntime>,
    inbound: TopicDelivery,
    permit: OwnedSemaphorePermit,
) {
    let claim = topic.enter_claim(&inbound.delivery, permit);
    // However the run ends (a panic in the runtime's own code included), its slot is freed.
    struct FreeSlot(Arc<Claim>);
    impl Drop for FreeSlot {
        fn drop(&mut self) {
            self.0.free_slot();
        }
    }
    let _free = FreeSlot(claim.clone());
    let running = Running::start(&topic.meter, ms_to_time(inbound.delivery.envelope.due_ms));
    if let Some(tick) = claim.tick() {
        tick.started(running.late());
    }
    let started = topic.handler.call(&inbound, Ack::new(claim.clone()));
    let ctx = RunContext {
        health: &topic.health,
        abort: &topic.abort,
        claim_len: topic.options.ack_timeout(),
        timeout: topic.options.timeout(),
        meter: &topic.meter,
    };
    let after_run = |result| topic.handler.after_run(result);
    drive(&ctx, claim, started, after_run).await;
}
