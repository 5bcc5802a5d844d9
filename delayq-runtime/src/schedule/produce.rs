//! The tick producer: one task per runtime writes the ticks of its schedules a little ahead
//! of their time (the `#[scheduled]` fns it runs, and the dynamic schedules of the topics it
//! listens on). Every process doing so for the same schedule races for each tick; the write
//! is fenced on the schedule's record, so one wins and the others read the record again.
//!
//! Between ticks it sleeps until the next one is due (less the lead). It polls the schedule
//! index's version to learn of schedules changed by other processes: every 10 s while it has
//! schedules, every minute while it has none (this process's own changes wake it at once).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use delayq_core::protocol::{time_to_ms, Produced, ScheduleState, SCHEDULES_CHANGED};
use delayq_core::Result;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::health::{Health, RetryDelay};

/// How far ahead of its time a tick is written: it then waits in the delay queue and is
/// delivered at its time with the queue's precision.
pub(crate) const LEAD: Duration = Duration::from_secs(1);
const POLL_WITH_SCHEDULES: Duration = Duration::from_secs(10);
const POLL_WITHOUT: Duration = Duration::from_secs(60);
/// Polls between two readings of Redis' clock (the ticks' times are Redis' clock).
const CLOCK_EVERY_POLLS: u32 = 6;

/// What this runtime produces ticks for.
pub(crate) struct Producing {
    /// The names of the `#[scheduled]` fns it runs.
    pub(crate) code: HashSet<String>,
    /// The topics it listens on (dynamic schedules of those).
    pub(crate) topics: HashSet<String>,
}

struct Poller {
    version: Option<u64>,
    polls: u32,
    /// Redis' clock minus this machine's, in ms.
    offset_ms: i64,
}

fn local_ms() -> u64 {
    time_to_ms(SystemTime::now())
}

impl Poller {
    fn now_ms(&self) -> u64 {
        local_ms().saturating_add_signed(self.offset_ms)
    }

    /// Reads Redis' clock every few polls, and the index and its schedules again when the
    /// index's version changed.
    async fn poll(
        &mut self,
        producer: &delayq_core::Producer,
        producing: &Producing,
        known: &mut HashMap<String, ScheduleState>,
    ) -> Result<()> {
        if self.polls.is_multiple_of(CLOCK_EVERY_POLLS) {
            let before = local_ms();
            let redis = producer.redis_now_ms().await?;
            let after = local_ms();
            self.offset_ms = redis as i64 - ((before + after) / 2) as i64;
        }
        self.polls = self.polls.wrapping_add(1);
        let version = producer.schedules_version().await?;
        if self.version == Some(version) {
            return Ok(());
        }
        let mut seen = HashSet::new();
        for (name, topic) in producer.schedule_index().await? {
            if !producing.code.contains(&name) && !producing.topics.contains(&topic) {
                continue;
            }
            match producer.schedule_state_at(&name, &topic).await? {
                Some(state) if !state.from_code || producing.code.contains(&name) => {
                    seen.insert(name.clone());
                    known.insert(name, state);
                }
                _ => {}
            }
        }
        known.retain(|name, _| seen.contains(name));
        self.version = Some(version);
        Ok(())
    }
}

/// What the producer knows between passes.
pub(crate) struct Producer {
    producer: delayq_core::Producer,
    producing: Producing,
    known: HashMap<String, ScheduleState>,
    poller: Poller,
    health: Health,
    retry: RetryDelay,
}

impl Producer {
    /// Reads the schedules and writes what is due, once: spawn calls it before any listener
    /// claims, so that a catch-up after an outage skips the ticks written ahead before it
    /// before a consumer could run them.
    pub(crate) async fn first_pass(
        producer: delayq_core::Producer,
        producing: Producing,
    ) -> Result<Self> {
        let mut this = Producer {
            producer,
            producing,
            known: HashMap::new(),
            poller: Poller {
                version: None,
                polls: 0,
                offset_ms: 0,
            },
            health: Health::new("schedules".to_string()),
            retry: RetryDelay::new(),
        };
        this.poller
            .poll(&this.producer, &this.producing, &mut this.known)
            .await?;
        this.produce_due(Instant::now() + POLL_WITH_SCHEDULES).await;
        Ok(this)
    }

    fn poll_every(&self) -> Duration {
        if self.known.is_empty() {
            POLL_WITHOUT
        } else {
            POLL_WITH_SCHEDULES
        }
    }

    /// Writes every known schedule's due ticks; returns when to look next (at the latest
    /// `wake_at`).
    async fn produce_due(&mut self, mut wake_at: Instant) -> Instant {
        let lead = LEAD.as_millis() as u64;
        let names: Vec<String> = self.known.keys().cloned().collect();
        for name in names {
            let Some(state) = self.known.get_mut(&name) else {
                continue;
            };
            let now = self.poller.now_ms();
            match self.producer.produce_ticks(state, now, lead).await {
                Ok(Produced::NotYet) => {}
                Ok(Produced::Ticks { ticks, skipped }) => {
                    record(&name, &ticks, skipped, now);
                    self.health.ok();
                    self.retry = RetryDelay::new();
                }
                // Refreshed from the fence's reply: nothing to do.
                Ok(Produced::Stale) => {}
                Ok(Produced::Gone) => {
                    self.known.remove(&name);
                    continue;
                }
                Err(error) => {
                    self.health.failed(&error);
                    wake_at = wake_at.min(Instant::now() + self.retry.next_delay());
                }
            }
            if let Some(state) = self.known.get(&name) {
                let due_in = state
                    .next
                    .saturating_sub(self.poller.now_ms())
                    .saturating_sub(lead);
                wake_at = wake_at.min(Instant::now() + Duration::from_millis(due_in));
            }
        }
        wake_at
    }

    /// Produces ticks until `stop`.
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        let mut next_poll = Instant::now() + self.poll_every();
        loop {
            let changed = SCHEDULES_CHANGED.notified();
            if Instant::now() >= next_poll {
                let polled = self
                    .poller
                    .poll(&self.producer, &self.producing, &mut self.known)
                    .await;
                next_poll = Instant::now()
                    + match polled {
                        Ok(()) => {
                            self.health.ok();
                            self.poll_every()
                        }
                        Err(error) => {
                            self.health.failed(&error);
                            self.retry.next_delay()
                        }
                    };
            }
            let wake_at = self.produce_due(next_poll).await;
            tokio::select! {
                _ = tokio::time::sleep_until(wake_at) => {}
                _ = changed => next_poll = Instant::now(),
                _ = stop.cancelled() => return,
            }
        }
    }
}
/// `delayq_schedule_ticks_total{schedule,outcome}` (`produced`, `skipped`) and
/// `delayq_schedule_lag_seconds{schedule}`: how late the earliest tick of a write was
/// written (0 when ahead of its time).
fn record(name: &str, ticks: &[u64], skipped: u64, now_ms: u64) {
    let labels = |outcome: &'static str| {
        [
            metrics::Label::new("schedule", name.to_string()),
            metrics::Label::new("outcome", outcome),
        ]
    };
    metrics::counter!("delayq_schedule_ticks_total", labels("produced").to_vec())
        .increment(ticks.len() as u64);
    if skipped > 0 {
        metrics::counter!("delayq_schedule_ticks_total", labels("skipped").to_vec())
            .increment(skipped);
        tracing::info!(
            schedule = name,
            count = skipped,
            "ticks skipped by the catch-up policy"
        );
    }
    if let Some(first) = ticks.first() {
        let lag = now_ms.saturating_sub(*first) as f64 / 1_000.0;
        metrics::gauge!(
            "delayq_schedule_lag_seconds",
            [metrics::Label::new("schedule", name.to_string())].to_vec()
        )
        .set(lag);
    }
}
