//! The tick producer: each runtime writes the ticks of its schedules a little ahead of their
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
//!   and sends them to the producer over a channel. It also measures Redis' clock.
//! - the producer sleeps until the next tick is due (less the lead) or an update comes, and
//!   writes every due schedule's ticks, several calls in flight at once.
//!
//! A record that cannot be used (edited by hand, written by a newer delayq) is skipped, with
//! an error in the log and in health, and read again with backoff (from 1 s, doubling to a
//! minute): it never stops start or the other schedules. A schedule whose write fails is tried
//! again with backoff of its own (from 100 ms, doubling to 5 s), the others going on.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use delayq_core::protocol::{
    time_to_ms, IndexChanges, Produced, RecordRead, ScheduleState, SCHEDULES_CHANGED,
};
use delayq_core::Result;
use futures_util::StreamExt;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::health::{Health, RetryDelay};

/// How far ahead of its time a tick is written: it then waits in the delay queue and is
/// delivered at its time with the queue's precision.
pub(crate) const LEAD: Duration = Duration::from_secs(1);
const POLL_WITH_SCHEDULES: Duration = Duration::from_secs(10);
const POLL_WITHOUT: Duration = Duration::from_secs(60);
/// How often the reader measures Redis' clock (the ticks' times are Redis' clock).
const CLOCK_EVERY: Duration = Duration::from_secs(60);
/// Tick writes in flight at once when several schedules are due together.
const WRITES_IN_FLIGHT: usize = 32;
/// A record that cannot be used is read again after this, doubling up to `BROKEN_LAST` (at
/// most a command a second for a record that stays broken).
const BROKEN_FIRST: Duration = Duration::from_secs(1);
const BROKEN_LAST: Duration = Duration::from_secs(60);
/// A schedule whose write failed (Redis' trouble, most likely passing) is tried again after
/// this, doubling up to `FAILED_LAST`, like the runtime's other Redis calls.
const FAILED_FIRST: Duration = Duration::from_millis(100);
const FAILED_LAST: Duration = Duration::from_secs(5);
/// The producer looks at least this often (a guard against a clock step).
const LOOK_AT_LEAST: Duration = Duration::from_secs(10);

/// What this runtime produces ticks for.
pub(crate) struct Producing {
    /// The names of the `#[scheduled]` fns it runs.
    pub(crate) code: HashSet<String>,
    /// The topics it listens on (dynamic schedules of those).
    pub(crate) topics: HashSet<String>,
}

impl Producing {
    /// Whether the schedule `name` on `topic` may be this runtime's (its record decides).
    fn wants(&self, name: &str, topic: &str) -> bool {
        self.code.contains(name) || self.topics.contains(topic)
    }

    /// Whether a record of `name` owned by code (`from_code`) or not is this runtime's: a
    /// `#[scheduled]` fn's only where that fn runs.
    fn takes(&self, name: &str, from_code: bool) -> bool {
        !from_code || self.code.contains(name)
    }
}

/// Schedules this runtime should produce whose records it cannot use: since when and why
/// (shown by `RuntimeHandle::health`).
#[derive(Default)]
pub(crate) struct FailingSchedules(Mutex<BTreeMap<String, (SystemTime, String)>>);

impl FailingSchedules {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (SystemTime, String)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `name` was not failing with `error` already.
    fn set(&self, name: &str, error: &str) -> bool {
        let mut all = self.lock();
        if all.get(name).is_some_and(|(_, e)| e == error) {
            return false;
        }
        all.insert(name.to_string(), (SystemTime::now(), error.to_string()));
        true
    }

    /// Whether `name` was failing.
    fn clear(&self, name: &str) -> bool {
        self.lock().remove(name).is_some()
    }

    /// Every failing schedule: (name, since, error), by name.
    pub(crate) fn all(&self) -> Vec<(String, SystemTime, String)> {
        self.lock()
            .iter()
            .map(|(n, (since, e))| (n.clone(), *since, e.clone()))
            .collect()
    }
}

/// Redis' clock as this machine estimates it: Redis' time at the last measurement, moved on
/// by this machine's monotonic clock since. A step of the machine's wall clock (an NTP
/// correction, a VM resumed) changes nothing here, so it can neither make the producer spin
/// on ticks it thinks are due nor sleep past ticks that are.
#[derive(Default)]
struct Clock {
    measured: std::sync::Mutex<Option<(u64, std::time::Instant)>>,
}

fn local_ms() -> u64 {
    time_to_ms(SystemTime::now())
}

impl Clock {
    fn now_ms(&self) -> u64 {
        match *self.measured.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((redis_ms, at)) => redis_ms + at.elapsed().as_millis() as u64,
            None => local_ms(),
        }
    }

    async fn measure(&self, producer: &delayq_core::Producer) -> Result<()> {
        let before = std::time::Instant::now();
        let redis = producer.redis_now_ms().await?;
        // Redis read its clock about half way through the round trip.
        let at = before + before.elapsed() / 2;
        *self.measured.lock().unwrap_or_else(|p| p.into_inner()) = Some((redis, at));
        Ok(())
    }
}

/// Schedules read from Redis: (name, topic, record). A removed schedule, or one that is no
/// longer this runtime's, is [`RecordRead::Gone`].
type Reads = Vec<(String, String, RecordRead)>;

/// What the reader tells the producer.
enum Update {
    /// Every schedule of this runtime (on start, or when too far behind the change log).
    All(Reads),
    /// These changed.
    Changed(Reads),
}

/// Reads the index and learns of its changes.
struct Reader {
    producer: delayq_core::Producer,
    producing: Arc<Producing>,
    /// The index's version last read.
    version: Option<u64>,
    clock: Arc<Clock>,
}

impl Reader {
    /// What changed since the version last read, if anything.
    async fn read(&mut self) -> Result<Option<Update>> {
        let update = match self.producer.schedule_changes(self.version).await? {
            IndexChanges::Unchanged => return Ok(None),
            IndexChanges::Changed { version, names } => {
                let topics = self.producer.schedule_topics(&names).await?;
                let mut ours = Vec::new();
                let mut gone = Vec::new();
                for (name, topic) in names.into_iter().zip(topics) {
                    match topic {
                        Some(t) if self.producing.wants(&name, &t) => ours.push((name, t)),
                        _ => gone.push(name),
                    }
                }
                let mut reads = self.records(ours).await?;
                reads.extend(
                    gone.into_iter()
                        .map(|n| (n, String::new(), RecordRead::Gone)),
                );
                self.version = Some(version);
                Update::Changed(reads)
            }
            IndexChanges::Reread { version } => {
                let ours: Vec<(String, String)> = self
                    .producer
                    .schedule_index()
                    .await?
                    .into_iter()
                    .filter(|(name, topic)| self.producing.wants(name, topic))
                    .collect();
                let reads = self.records(ours).await?;
                self.version = Some(version);
                Update::All(reads)
            }
        };
        Ok(Some(update))
    }

    /// The records of `schedules`, in pipelines.
    async fn records(&self, schedules: Vec<(String, String)>) -> Result<Reads> {
        let reads = self.producer.schedule_records(&schedules).await?;
        Ok(schedules
            .into_iter()
            .zip(reads)
            .map(|((name, topic), read)| (name, topic, read))
            .collect())
    }

    /// Learns of changes until `stop`, sending them to the producer.
    async fn run(
        mut self,
        updates: mpsc::UnboundedSender<Update>,
        woken: Arc<Notify>,
        has_schedules: Arc<std::sync::atomic::AtomicBool>,
        stop: CancellationToken,
    ) {
        let health = Health::new("schedules (reading)".to_string());
        let mut retry = RetryDelay::new();
        let mut clock_at = Instant::now() + CLOCK_EVERY;
        let mut wait = self.poll_every(&has_schedules);
        // Listening before each read, so that a change made while it runs is read next.
        let mut changed = Box::pin(SCHEDULES_CHANGED.notified());
        changed.as_mut().enable();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = &mut changed => {}
                _ = woken.notified() => {}
                _ = stop.cancelled() => return,
            }
            changed = Box::pin(SCHEDULES_CHANGED.notified());
            changed.as_mut().enable();
            if Instant::now() >= clock_at {
                match self.clock.measure(&self.producer).await {
                    Ok(()) => clock_at = Instant::now() + CLOCK_EVERY,
                    Err(error) => health.failed(&error),
                }
            }
            match self.read().await {
                Ok(update) => {
                    health.ok();
                    retry.reset();
                    wait = self.poll_every(&has_schedules);
                    if let Some(update) = update {
                        if updates.send(update).is_err() {
                            return; // the producer stopped
                        }
                    }
                }
                Err(error) => {
                    health.failed(&error);
                    wait = retry.next_delay();
                }
            }
        }
    }

    fn poll_every(&self, has_schedules: &std::sync::atomic::AtomicBool) -> Duration {
        if has_schedules.load(Ordering::Relaxed) {
            POLL_WITH_SCHEDULES
        } else {
            POLL_WITHOUT
        }
    }
}

/// A schedule not tried before `at` (its record cannot be used, or its writes failed): the
/// delay doubles from its first up to `last`.
struct Backoff {
    at: Instant,
    delay: Duration,
    last: Duration,
}

impl Backoff {
    fn new(first: Duration, last: Duration) -> Self {
        Backoff {
            at: Instant::now() + first,
            delay: first,
            last,
        }
    }

    fn again(&mut self) {
        self.delay = (self.delay * 2).min(self.last);
        self.at = Instant::now() + self.delay;
    }
}

/// A schedule whose record cannot be used: read again at its backoff's time.
struct Broken {
    topic: String,
    backoff: Backoff,
}

/// What one write of a schedule's ticks came to.
enum Written {
    Done(Result<Produced>),
    /// The record is gone.
    Gone,
    /// The record changed: read again.
    Reread(Result<RecordRead>),
}

/// The tick producer (see the module's doc).
pub(crate) struct Producer {
    producer: delayq_core::Producer,
    producing: Arc<Producing>,
    known: HashMap<String, ScheduleState>,
    /// Known schedules whose last write failed: not tried again before their time.
    paused: HashMap<String, Backoff>,
    broken: HashMap<String, Broken>,
    failing: Arc<FailingSchedules>,
    clock: Arc<Clock>,
    /// The reader, until `run` starts it.
    reader: Option<Reader>,
    /// Wakes the reader (a change announced over pub/sub).
    woken: Arc<Notify>,
    has_schedules: Arc<std::sync::atomic::AtomicBool>,
    health: Health,
}

impl Producer {
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
        let mut reader = Reader {
            producer: producer.clone(),
            producing: producing.clone(),
            version: None,
            clock: clock.clone(),
        };
        let first = reader.read().await?;
        let mut this = Producer {
            producer,
            producing,
            known: HashMap::new(),
            paused: HashMap::new(),
            broken: HashMap::new(),
            failing: Arc::new(FailingSchedules::default()),
            clock,
            reader: Some(reader),
            woken: Arc::new(Notify::new()),
            has_schedules: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            health: Health::new("schedules".to_string()),
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

    fn apply(&mut self, update: Update) {
        let reads = match update {
            Update::All(reads) => {
                let now: HashSet<&str> = reads.iter().map(|(n, ..)| n.as_str()).collect();
                let old: Vec<String> = self
                    .known
                    .keys()
                    .chain(self.broken.keys())
                    .filter(|n| !now.contains(n.as_str()))
                    .cloned()
                    .collect();
                for name in old {
                    self.set(name, String::new(), RecordRead::Gone);
                }
                reads
            }
            Update::Changed(reads) => reads,
        };
        for (name, topic, read) in reads {
            self.set(name, topic, read);
        }
        self.has_schedules
            .store(!self.known.is_empty(), Ordering::Relaxed);
    }

    /// Takes what was read of schedule `name` (on `topic`).
    fn set(&mut self, name: String, topic: String, read: RecordRead) {
        self.paused.remove(&name);
        match read {
            RecordRead::Ok(state) if self.producing.takes(&name, state.from_code) => {
                self.broken.remove(&name);
                if self.failing.clear(&name) {
                    tracing::info!(schedule = %name, "the schedule's record can be used again; producing it");
                }
                self.known.insert(name, *state);
            }
            RecordRead::Broken { from_code, error } if self.producing.takes(&name, from_code) => {
                self.known.remove(&name);
                if self.failing.set(&name, &error) {
                    tracing::error!(schedule = %name, topic = %topic, %error, "a schedule's record cannot be used; skipping it (the other schedules go on) and reading it again with backoff");
                }
                match self.broken.get_mut(&name) {
                    Some(b) => {
                        b.topic = topic;
                        b.backoff.again();
                    }
                    None => {
                        self.broken.insert(
                            name,
                            Broken {
                                topic,
                                backoff: Backoff::new(BROKEN_FIRST, BROKEN_LAST),
                            },
                        );
                    }
                }
            }
            _ => {
                self.known.remove(&name);
                self.broken.remove(&name);
                self.failing.clear(&name);
            }
        }
    }

    /// Writes the due ticks of every known schedule (several at once), and reads again the
    /// broken records whose time came; returns when to look next.
    async fn produce_due(&mut self) -> Instant {
        let lead = LEAD.as_millis() as u64;
        let now = Instant::now();
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
        let written: Vec<(ScheduleState, Written)> =
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
                        record(&state.name, &ticks, skipped, now);
                        Written::Done(Ok(Produced::Ticks { ticks, skipped }))
                    }
                    other => Written::Done(other),
                };
                (state, written)
            }))
            .buffer_unordered(WRITES_IN_FLIGHT)
            .collect()
            .await;
        for (state, written) in written {
            let name = state.name.clone();
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
