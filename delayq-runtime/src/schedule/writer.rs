//! The tick writer: each runtime writes the ticks of its schedules a little ahead of their
//! time (the `#[scheduled]` fns it runs, and the dynamic schedules of the topics it listens
//! on). Every process doing so for the same schedule races for each tick; the write is fenced
//! on the schedule's record (its `next` and `gen`), so one wins and the others learn the new
//! `next` from the fence's reply; only a record that changed otherwise (a new spec, a hand
//! edit) is read again.
//!
//! Two tasks share the work, so that reading schedules never holds up a tick:
//! - the reader learns of changes: woken at once by a change anywhere (this process's own,
//!   and other processes' over the topics' wake-up channel, see `delay/wake.rs`), and polling
//!   the index's version as a safety net (every 10 s while the runtime has schedules, every
//!   minute while it has none). It reads only the schedules the change log names since the
//!   version it saw (the whole index on start, or when too far behind), records in pipelines,
//!   and sends them to the writer over a channel. It also measures Redis' clock.
//! - the writer sleeps until the next tick is due (less the lead) or an update comes, and
//!   writes every due schedule's ticks, several calls in flight at once.
//!
//! A record that cannot be used (edited by hand, written by a newer delayq) is skipped, with
//! an error in the log and in health, and read again with backoff (from 1 s, doubling to a
//! minute): it never stops start or the other schedules. A schedule whose write fails is tried
//! again with backoff of its own (from 100 ms, doubling to 5 s), the others going on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::{Produced, RecordRead, ScheduleState};
use delayq_core::Result;
use futures_util::StreamExt;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backoff::{Backoff, Broken};
use super::clock::Clock;
use super::metrics::{self, LAG_HELD};
use super::producing::{FailingSchedules, Producing};
use super::reader::Reader;
use crate::health::Health;

/// How far ahead of its time a tick is written: it then waits in the delay queue and is
/// delivered at its time with the queue's precision.
pub(crate) const LEAD: Duration = Duration::from_secs(1);
/// Tick writes in flight at once when several schedules are due together.
const WRITES_IN_FLIGHT: usize = 32;
/// A schedule whose write failed (Redis' trouble, most likely passing) is tried again after
/// this, doubling up to `FAILED_LAST`, like the runtime's other Redis calls.
const FAILED_FIRST: Duration = Duration::from_millis(100);
const FAILED_LAST: Duration = Duration::from_secs(5);
/// The writer looks at least this often (a guard against a clock step).
const LOOK_AT_LEAST: Duration = Duration::from_secs(10);

/// What one write of a schedule's ticks came to.
enum Written {
    Done(Result<Produced>),
    /// The record is gone.
    Gone,
    /// The record changed: read again.
    Reread(Result<RecordRead>),
}

/// The tick writer (see the module's doc): writes the ticks of this runtime's schedules a
/// little ahead of their time, with the real [`Producer`](delayq_core::Producer).
pub(crate) struct TickWriter {
    producer: delayq_core::Producer,
    pub(super) producing: Arc<Producing>,
    pub(super) known: HashMap<String, ScheduleState>,
    /// Known schedules whose last write failed: not tried again before their time.
    pub(super) paused: HashMap<String, Backoff>,
    pub(super) broken: HashMap<String, Broken>,
    pub(super) failing: Arc<FailingSchedules>,
    clock: Arc<Clock>,
    /// The reader, until `run` starts it.
    reader: Option<Reader>,
    /// Wakes the reader (a change announced over pub/sub).
    woken: Arc<Notify>,
    pub(super) has_schedules: Arc<AtomicBool>,
    health: Health,
    /// Schedules whose lag gauge shows a late write, until when (see metrics.rs).
    lag_shown: HashMap<String, Instant>,
}

impl TickWriter {
    /// Reads the schedules and writes what is due, once: spawn calls it before any listener
    /// claims, so that a catch-up after an outage skips the ticks written ahead before it
    /// before a consumer could run them. A record that cannot be used is skipped (logged).
    pub(crate) async fn first_pass(
        producer: delayq_core::Producer,
        producing: Producing,
    ) -> Result<Self> {
        let producing = Arc::new(producing);
        let clock = Arc::new(Clock::default());
        clock.measure(&producer).await?;
        let mut reader = Reader::new(producer.clone(), producing.clone(), clock.clone());
        let first = reader.read().await?;
        let mut this = TickWriter {
            producer,
            producing,
            known: HashMap::new(),
            paused: HashMap::new(),
            broken: HashMap::new(),
            failing: Arc::new(FailingSchedules::default()),
            clock,
            reader: Some(reader),
            woken: Arc::new(Notify::new()),
            has_schedules: Arc::new(AtomicBool::new(false)),
            health: Health::new("schedules".to_string()),
            lag_shown: HashMap::new(),
        };
        if let Some(update) = first {
            this.apply(update);
        }
        this.produce_due().await;
        Ok(this)
    }

    /// Notified when a schedule of this runtime's topics changed in another process (the
    /// wake-up subscriber does).
    pub(crate) fn wake_handle(&self) -> Arc<Notify> {
        self.woken.clone()
    }

    /// The schedules whose records cannot be used, for health.
    pub(crate) fn failing(&self) -> Arc<FailingSchedules> {
        self.failing.clone()
    }

    /// Writes the due ticks of every known schedule (several at once), and reads again the
    /// broken records whose time came; returns when to look next.
    async fn produce_due(&mut self) -> Instant {
        let lead = LEAD.as_millis() as u64;
        let now = Instant::now();
        self.lag_shown.retain(|name, until| {
            let over = *until <= now;
            if over {
                metrics::lag_over(name);
            }
            !over
        });
        let horizon = self.clock.now_ms() + lead;
        let due: Vec<String> = self
            .known
            .iter()
            .filter(|(name, s)| {
                s.next <= horizon && self.paused.get(*name).is_none_or(|p| p.at <= now)
            })
            .map(|(name, _)| name.clone())
            .collect();
        let states: Vec<ScheduleState> = due
            .iter()
            .filter_map(|name| self.known.remove(name))
            .collect();
        let (producer, clock) = (&self.producer, &self.clock);
        let written: Vec<(ScheduleState, Written, bool)> =
            futures_util::stream::iter(states.into_iter().map(|mut state| async move {
                let now = clock.now_ms();
                let written = match producer.produce_ticks(&mut state, now, lead).await {
                    // Refreshed from the fence's reply (another process was first); a changed
                    // spec is read again from the record.
                    Ok(Produced::Stale) => Written::Done(Ok(Produced::Stale)),
                    Ok(Produced::Changed) => {
                        let topic = state.topic().to_string();
                        Written::Reread(producer.schedule_record(&state.name, &topic).await)
                    }
                    Ok(Produced::Gone) => Written::Gone,
                    Ok(Produced::Ticks { ticks, skipped }) => {
                        let late = metrics::written(&state.name, &ticks, skipped, now);
                        return (
                            state,
                            Written::Done(Ok(Produced::Ticks { ticks, skipped })),
                            late,
                        );
                    }
                    other => Written::Done(other),
                };
                (state, written, false)
            }))
            .buffer_unordered(WRITES_IN_FLIGHT)
            .collect()
            .await;
        for (state, written, late) in written {
            let name = state.name.clone();
            if late {
                self.lag_shown.insert(name.clone(), now + LAG_HELD);
            }
            match written {
                Written::Gone => {
                    self.paused.remove(&name);
                }
                Written::Done(Ok(_)) => {
                    self.health.ok();
                    self.paused.remove(&name);
                    self.known.insert(name, state);
                }
                Written::Reread(Ok(read)) => {
                    let topic = state.topic().to_string();
                    self.set(name, topic, read);
                }
                Written::Done(Err(error)) | Written::Reread(Err(error)) => {
                    self.health.failed(&error);
                    match self.paused.get_mut(&name) {
                        Some(p) => p.again(),
                        None => {
                            self.paused
                                .insert(name.clone(), Backoff::new(FAILED_FIRST, FAILED_LAST));
                        }
                    }
                    self.known.insert(name, state);
                }
            }
        }
        self.read_broken().await;
        self.has_schedules
            .store(!self.known.is_empty(), Ordering::Relaxed);
        self.next_look()
    }

    /// Reads again the broken records whose time came.
    async fn read_broken(&mut self) {
        let now = Instant::now();
        let due: Vec<(String, String)> = self
            .broken
            .iter()
            .filter(|(_, b)| b.backoff.at <= now)
            .map(|(n, b)| (n.clone(), b.topic.clone()))
            .collect();
        for (name, topic) in due {
            match self.producer.schedule_record(&name, &topic).await {
                Ok(read) => self.set(name, topic, read),
                Err(error) => {
                    self.health.failed(&error);
                    if let Some(b) = self.broken.get_mut(&name) {
                        b.backoff.again();
                    }
                }
            }
        }
    }

    /// When the next tick is due (less the lead), or a paused or broken schedule's time comes.
    fn next_look(&self) -> Instant {
        let now = Instant::now();
        let lead = LEAD.as_millis() as u64;
        let now_ms = self.clock.now_ms();
        let mut at = now + LOOK_AT_LEAST;
        for (name, state) in &self.known {
            let due =
                now + Duration::from_millis(state.next.saturating_sub(now_ms).saturating_sub(lead));
            let due = match self.paused.get(name) {
                Some(p) => due.max(p.at),
                None => due,
            };
            at = at.min(due);
        }
        for b in self.broken.values() {
            at = at.min(b.backoff.at);
        }
        for until in self.lag_shown.values() {
            at = at.min(*until);
        }
        at
    }

    /// Produces ticks until `stop` (and reads changes in a task of its own).
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        let (updates, mut incoming) = mpsc::unbounded_channel();
        if let Some(reader) = self.reader.take() {
            tokio::spawn(reader.run(
                updates,
                self.woken.clone(),
                self.has_schedules.clone(),
                stop.clone(),
            ));
        }
        loop {
            let wake_at = self.produce_due().await;
            tokio::select! {
                _ = tokio::time::sleep_until(wake_at) => {}
                update = incoming.recv() => match update {
                    Some(update) => {
                        self.apply(update);
                        while let Ok(more) = incoming.try_recv() {
                            self.apply(more);
                        }
                    }
                    None => return, // the reader stopped
                },
                _ = stop.cancelled() => return,
            }
        }
    }
}
