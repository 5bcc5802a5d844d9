//! A running runtime: its producer, and the bounded graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::MAX_CLAIM_BATCH;
use delayq_core::{Error, Producer, Result};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::delay::TopicRuntime;
use crate::stream::StreamRuntime;

/// After the grace period: how long aborted handlers get to return before their claims are
/// collected, and how long handing them back may take in all. Together they keep a shutdown
/// within `shutdown_grace` + 5 s even when Redis is frozen or gone.
const STRAGGLER_WAIT: Duration = Duration::from_secs(1);
const HAND_BACK_WAIT: Duration = Duration::from_secs(3);
/// How many ids of unreturned claims a shutdown log line lists.
const LOGGED_IDS: usize = 20;

/// A running runtime. [`shutdown`](RuntimeHandle::shutdown) stops it gracefully; dropping it
/// stops it at once (claimed messages are then delivered again after their ack deadline).
pub struct RuntimeHandle {
    topics: Vec<Arc<TopicRuntime>>,
    streams: Vec<Arc<StreamRuntime>>,
    tasks: Vec<JoinHandle<()>>,
    producer: Producer,
    stop: CancellationToken,
    abort: CancellationToken,
    grace: Duration,
}

impl std::fmt::Debug for RuntimeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeHandle")
            .field("topics", &self.topics())
            .field("streams", &self.streams())
            .field("grace", &self.grace)
            .finish()
    }
}

impl RuntimeHandle {
    /// `cancel`: (stop claiming, abort handlers).
    pub(crate) fn new(
        (topics, streams): (Vec<Arc<TopicRuntime>>, Vec<Arc<StreamRuntime>>),
        tasks: Vec<JoinHandle<()>>,
        producer: Producer,
        cancel: (CancellationToken, CancellationToken),
        grace: Duration,
    ) -> Self {
        RuntimeHandle {
            topics,
            streams,
            tasks,
            producer,
            stop: cancel.0,
            abort: cancel.1,
            grace,
        }
    }

    /// The topics this runtime serves.
    pub fn topics(&self) -> Vec<&str> {
        self.topics.iter().map(|t| &*t.name).collect()
    }

    /// The stream listeners this runtime runs, as `(stream, group, consumer)`.
    pub fn streams(&self) -> Vec<(&str, &str, &str)> {
        self.streams
            .iter()
            .map(|s| (&*s.stream, &*s.group_name, s.group.consumer()))
            .collect()
    }

    /// A producer with this runtime's Redis URL and namespace, sharing its connection: what it
    /// sends, this runtime's listeners receive.
    pub fn producer(&self) -> Producer {
        self.producer.clone()
    }

    /// Deliveries this runtime tracks as claimed and unsettled (what a shutdown would hand
    /// back). For tests of the runtime's bookkeeping.
    #[doc(hidden)]
    pub fn tracked_claims(&self) -> usize {
        self.topics.iter().map(|t| t.books.len()).sum::<usize>()
            + self.streams.iter().map(|s| s.books.len()).sum::<usize>()
    }

    /// Stops claiming, lets running handlers finish within the grace period, then hands every
    /// claimed-but-unfinished message back to its topic at once, without using up an attempt.
    ///
    /// It returns within the grace period plus 5 s even when Redis is frozen or gone: claims
    /// it could not hand back by then are logged (with their ids) and come back after their
    /// ack deadline, and the result is [`Error::Unreturned`].
    pub async fn shutdown(mut self) -> Result<()> {
        self.stop.cancel();
        let grace_end = Instant::now() + self.grace;
        // The pools stop at once unless a Redis call holds them; handlers get the grace.
        let tasks = std::mem::take(&mut self.tasks);
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
            let unsettled = t.books.take_unsettled();
            for chunk in unsettled.chunks(MAX_CLAIM_BATCH) {
                match tokio::time::timeout_at(hand_back_end, t.queue.release(chunk)).await {
                    Ok(Ok(n)) => handed_back += n,
                    outcome => {
                        unreturned += chunk.len();
                        let error = match outcome {
                            Ok(Err(e)) => e.to_string(),
                            _ => "Redis did not answer before the shutdown deadline".to_string(),
                        };
                        let ids: Vec<&str> = chunk
                            .iter()
                            .take(LOGGED_IDS)
                            .map(|(id, _)| id.as_str())
                            .collect();
                        tracing::error!(
                            topic = %t.name,
                            %error,
                            count = chunk.len(),
                            ?ids,
                            "could not hand claimed messages back; they are delivered again after their ack deadline"
                        );
                    }
                }
            }
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
        if unreturned > 0 {
            return Err(Error::Unreturned { count: unreturned });
        }
        Ok(())
    }
}

/// Resolves once no handler of any of `topics` and `streams` runs.
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
}

/// Hands a stream's unsettled entries back (takeable at once, the delivery not counted) and
/// leaves its alive set; (handed back, not handed back).
async fn hand_back_entries(s: &StreamRuntime, deadline: Instant) -> (usize, usize) {
    let unsettled = s.books.take_unsettled();
    let mut handed_back = 0;
    let leave = tokio::time::timeout_at(deadline, s.group.leave()).await;
    if !matches!(leave, Ok(Ok(()))) {
        tracing::debug!(stream = %s.stream, group = %s.group_name, "could not leave the alive set; it expires by itself");
    }
    for chunk in unsettled.chunks(MAX_CLAIM_BATCH) {
        match tokio::time::timeout_at(deadline, s.group.hand_back(chunk, s.min_idle())).await {
            Ok(Ok(n)) => handed_back += n,
            outcome => {
                let error = match outcome {
                    Ok(Err(e)) => e.to_string(),
                    _ => "Redis did not answer before the shutdown deadline".to_string(),
                };
                let ids: Vec<&str> = chunk.iter().take(LOGGED_IDS).map(|id| &**id).collect();
                tracing::error!(
                    stream = %s.stream,
                    group = %s.group_name,
                    %error,
                    count = chunk.len(),
                    ?ids,
                    "could not hand entries back; another consumer takes them over after min_idle"
                );
                return (handed_back, unsettled.len() - handed_back);
            }
        }
    }
    (handed_back, 0)
}

impl Drop for RuntimeHandle {
    fn drop(&mut self) {
        self.stop.cancel();
        self.abort.cancel();
    }
}
