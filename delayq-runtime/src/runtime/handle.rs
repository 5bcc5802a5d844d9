//! A running runtime: its producer, and the bounded graceful shutdown.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq_core::{Error, Producer, Result};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::EffectiveConfig;
use super::hand_back::{hand_back_claims, hand_back_entries};
use super::probe::{Health, Probe};
use crate::delay::TopicRuntime;
use crate::stream::StreamRuntime;

/// After the grace period: how long aborted handlers get to return before their claims are
/// collected, and how long handing them back may take in all. Together they keep a shutdown
/// within `shutdown_grace` + 5 s even when Redis is frozen or gone.
const STRAGGLER_WAIT: Duration = Duration::from_secs(1);
const HAND_BACK_WAIT: Duration = Duration::from_secs(3);

/// A running runtime. [`shutdown`](RuntimeHandle::shutdown) stops it gracefully; dropping it
/// stops it at once (claimed messages are then delivered again after their ack deadline).
pub struct RuntimeHandle {
    shared: Arc<Shared>,
}

/// What the handle, the `shutdown_on` watcher and the health endpoint share.
pub(crate) struct Shared {
    topics: Vec<Arc<TopicRuntime>>,
    streams: Vec<Arc<StreamRuntime>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    producer: Producer,
    stop: CancellationToken,
    abort: CancellationToken,
    /// Cancels the HTTP endpoint once the shutdown is over.
    serving: CancellationToken,
    grace: Duration,
    config: EffectiveConfig,
    pub(crate) probe: Arc<Probe>,
    /// The shutdown runs once; its result (how many claims were not handed back) is kept.
    outcome: tokio::sync::OnceCell<usize>,
    watches_signal: bool,
}

impl std::fmt::Debug for RuntimeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeHandle")
            .field("topics", &self.topics())
            .field("streams", &self.streams())
            .field("grace", &self.shared.grace)
            .finish()
    }
}

/// What `RuntimeHandle::new` takes, besides the pools.
pub(crate) struct Parts {
    pub(crate) tasks: Vec<JoinHandle<()>>,
    pub(crate) producer: Producer,
    /// (stop claiming, abort handlers, stop serving HTTP).
    pub(crate) cancel: (CancellationToken, CancellationToken, CancellationToken),
    pub(crate) grace: Duration,
    pub(crate) config: EffectiveConfig,
    pub(crate) probe: Arc<Probe>,
}

impl RuntimeHandle {
    pub(crate) fn new(
        (topics, streams): (Vec<Arc<TopicRuntime>>, Vec<Arc<StreamRuntime>>),
        parts: Parts,
        shutdown_on: Option<super::builder::Signal>,
    ) -> Self {
        parts
            .probe
            .tasks(parts.tasks.iter().map(JoinHandle::abort_handle));
        let shared = Arc::new(Shared {
            topics,
            streams,
            tasks: Mutex::new(parts.tasks),
            producer: parts.producer,
            stop: parts.cancel.0,
            abort: parts.cancel.1,
            serving: parts.cancel.2,
            grace: parts.grace,
            config: parts.config,
            probe: parts.probe,
            outcome: tokio::sync::OnceCell::new(),
            watches_signal: shutdown_on.is_some(),
        });
        if let Some(signal) = shutdown_on {
            let watcher = shared.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = signal => {
                        tracing::info!("shutdown signal received; shutting down");
                        let _ = watcher.shutdown().await;
                    }
                    // Dropped without a shutdown: nothing to wait for.
                    _ = watcher.abort.cancelled() => {}
                }
            });
        }
        RuntimeHandle { shared }
    }

    /// The topics this runtime serves.
    pub fn topics(&self) -> Vec<&str> {
        self.shared.topics.iter().map(|t| &*t.name).collect()
    }

    /// The stream listeners this runtime runs, as `(stream, group, consumer)`.
    pub fn streams(&self) -> Vec<(&str, &str, &str)> {
        self.shared
            .streams
            .iter()
            .map(|s| (&*s.stream, &*s.group_name, s.group.consumer()))
            .collect()
    }

    /// A producer with this runtime's Redis URL and namespace, sharing its connection: what it
    /// sends, this runtime's listeners receive.
    pub fn producer(&self) -> Producer {
        self.shared.producer.clone()
    }

    /// The effective options of the runtime and of every listener, stream listener, leader
    /// task and schedule it selected, each with where its value came from (builder,
    /// environment, file and line, attribute, default).
    pub fn config(&self) -> &EffectiveConfig {
        &self.shared.config
    }

    /// Asks Redis (a `PING` within 800 ms) and reads every listener's state: what
    /// `GET /health/ready` serves. Never fails: an unreachable Redis is
    /// [`RedisHealth::Down`](crate::RedisHealth::Down) with since when.
    pub async fn health(&self) -> Health {
        self.shared.probe.check().await
    }

    /// Deliveries this runtime tracks as claimed and unsettled (what a shutdown would hand
    /// back). For tests of the runtime's bookkeeping.
    #[doc(hidden)]
    pub fn tracked_claims(&self) -> usize {
        self.shared
            .topics
            .iter()
            .map(|t| t.books.len())
            .sum::<usize>()
            + self
                .shared
                .streams
                .iter()
                .map(|s| s.books.len())
                .sum::<usize>()
    }

    /// Stops claiming, lets running handlers finish within the grace period, then hands every
    /// claimed-but-unfinished message back to its topic at once, without using up an attempt.
    ///
    /// It returns within the grace period plus 5 s even when Redis is frozen or gone: claims
    /// it could not hand back by then are logged (with their ids) and come back after their
    /// ack deadline, and the result is [`Error::Unreturned`]. After a shutdown the
    /// `shutdown_on` signal began, it waits for that one and returns its result.
    ///
    /// # Errors
    /// [`Error::Unreturned`] with how many claims could not be handed back.
    pub async fn shutdown(self) -> Result<()> {
        self.shared.shutdown().await
    }

    /// Waits until the [`shutdown_on`](crate::RuntimeBuilder::shutdown_on) signal's graceful
    /// shutdown is over and returns its result (as [`shutdown`](Self::shutdown)).
    ///
    /// # Errors
    /// [`Error::Unreturned`] as for `shutdown`; [`Error::Config`] at once when the builder was
    /// given no `shutdown_on` (nothing would ever stop it).
    pub async fn stopped(self) -> Result<()> {
        if !self.shared.watches_signal {
            return Err(Error::Config(
                "stopped() waits for the shutdown_on(..) signal, and the builder was given none; call shutdown() instead".into(),
            ));
        }
        // The watcher holds the other reference; whichever finishes first runs it once.
        self.shared.abort.cancelled().await;
        self.shared.shutdown().await
    }
}

impl Shared {
    /// The graceful shutdown, run once; later callers wait for it and get its result.
    async fn shutdown(&self) -> Result<()> {
        let unreturned = *self.outcome.get_or_init(|| self.run_shutdown()).await;
        if unreturned > 0 {
            return Err(Error::Unreturned { count: unreturned });
        }
        Ok(())
    }

    async fn run_shutdown(&self) -> usize {
        self.probe.stopping();
        self.stop.cancel();
        let grace_end = Instant::now() + self.grace;
        // The pools stop at once unless a Redis call holds them; handlers get the grace.
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        let aborts: Vec<_> = tasks.iter().map(JoinHandle::abort_handle).collect();
        let pools = futures_util::future::join_all(tasks);
        let finished = tokio::time::timeout_at(
            grace_end,
            futures_util::future::join(pools, all_idle(&self.topics, &self.streams)),
        )
        .await
        .is_ok();
        self.abort.cancel();
        for a in aborts {
            a.abort();
        }
        if !finished {
            // Aborted handlers return at once; workers stuck on an unanswered Redis call do
            // not, and their claims are handed back (or logged) below all the same.
            let _ =
                tokio::time::timeout(STRAGGLER_WAIT, all_idle(&self.topics, &self.streams)).await;
        }
        let hand_back_end = Instant::now() + HAND_BACK_WAIT;
        let (mut handed_back, mut unreturned) = (0, 0);
        for t in &self.topics {
            let (n, failed) = hand_back_claims(t, hand_back_end).await;
            handed_back += n;
            unreturned += failed;
        }
        for s in &self.streams {
            let (n, failed) = hand_back_entries(s, hand_back_end).await;
            handed_back += n;
            unreturned += failed;
        }
        tracing::info!(
            handed_back,
            unreturned,
            grace_exceeded = !finished,
            "delayq runtime stopped"
        );
        super::history::write_last((&self.topics, &self.streams), hand_back_end).await;
        self.serving.cancel();
        unreturned
    }
}

/// Resolves once no handler of any of `topics` and `streams` runs, and every topic's run has
/// ended (counted its outcome: a run's ack frees its slot before the run counts it).
async fn all_idle(topics: &[Arc<TopicRuntime>], streams: &[Arc<StreamRuntime>]) {
    let slots = topics
        .iter()
        .map(|t| (t.slots.clone(), t.options.concurrency))
        .chain(
            streams
                .iter()
                .map(|s| (s.slots.clone(), s.options.concurrency)),
        );
    let waits = slots.map(|(slots, n)| async move { slots.acquire_many_owned(n).await.map(drop) });
    futures_util::future::join_all(waits).await;
    // Every slot free: no claim is on its way, so no run starts any more.
    for t in topics {
        t.runs.close();
        t.runs.wait().await;
    }
}

impl Drop for RuntimeHandle {
    fn drop(&mut self) {
        // Dropped without a shutdown (or after one): stop everything now.
        if self.shared.outcome.get().is_none() && !self.shared.watches_signal {
            self.shared.stop.cancel();
            self.shared.abort.cancel();
            self.shared.serving.cancel();
        }
    }
}
