//! The tick writer's reader: learns of changes to the schedule index (woken at once by a
//! change anywhere, polling the index's version as a safety net), reads the records of the
//! schedules that changed, and sends them to the writer. It also measures Redis' clock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::{IndexChanges, RecordRead, SCHEDULES_CHANGED};
use delayq_core::Result;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::producing::Producing;
use crate::health::{Health, RetryDelay};

const POLL_WITH_SCHEDULES: Duration = Duration::from_secs(10);
const POLL_WITHOUT: Duration = Duration::from_secs(60);
/// How often the reader measures Redis' clock (the ticks' times are Redis' clock).
const CLOCK_EVERY: Duration = Duration::from_secs(60);

/// Schedules read from Redis: (name, topic, record). A removed schedule, or one that is no
/// longer this runtime's, is [`RecordRead::Gone`].
pub(super) type Reads = Vec<(String, String, RecordRead)>;

/// What the reader tells the writer.
pub(super) enum Update {
    /// Every schedule of this runtime (on start, or when too far behind the change log).
    All(Reads),
    /// These changed.
    Changed(Reads),
}

/// Reads the index and learns of its changes.
pub(super) struct Reader {
    producer: delayq_core::Producer,
    producing: Arc<Producing>,
    /// The index's version last read.
    version: Option<u64>,
    clock: Arc<Clock>,
}

impl Reader {
    pub(super) fn new(
        producer: delayq_core::Producer,
        producing: Arc<Producing>,
        clock: Arc<Clock>,
    ) -> Reader {
        Reader {
            producer,
            producing,
            version: None,
            clock,
        }
    }

    /// What changed since the version last read, if anything.
    pub(super) async fn read(&mut self) -> Result<Option<Update>> {
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

    /// Learns of changes until `stop`, sending them to the writer.
    pub(super) async fn run(
        mut self,
        updates: mpsc::UnboundedSender<Update>,
        woken: Arc<Notify>,
        has_schedules: Arc<AtomicBool>,
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
                            return; // the writer stopped
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

    fn poll_every(&self, has_schedules: &AtomicBool) -> Duration {
        if has_schedules.load(Ordering::Relaxed) {
            POLL_WITH_SCHEDULES
        } else {
            POLL_WITHOUT
        }
    }
}
