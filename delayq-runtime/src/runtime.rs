//! `Runtime::builder()…spawn()`, `RuntimeHandle::shutdown`, and `start()`.

use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::{
    namespace_from_env, redis_url_from_env, validate_namespace, RedisConn, TopicKeys, TopicQueue,
    MAX_CLAIM_BATCH,
};
use delayq_core::{Error, Producer, Result, UrlOrigin};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::registry::{all_listeners, ListenerRegistration};
use crate::topic::TopicRuntime;
use crate::wake::run_subscriber;

const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(5);
/// After the grace period: how long aborted handlers get to return before their claims are
/// collected, and how long handing them back may take in all. Together they keep a shutdown
/// within `shutdown_grace` + 5 s even when Redis is frozen or gone.
const STRAGGLER_WAIT: Duration = Duration::from_secs(1);
const HAND_BACK_WAIT: Duration = Duration::from_secs(3);
/// How many ids of unreturned claims a shutdown log line lists.
const LOGGED_IDS: usize = 20;

/// Entry point for running listeners inside your own program (tests, embedding apps).
/// [`crate::start`] is the one-line version for `main`.
#[derive(Debug)]
pub struct Runtime {
    _private: (),
}

impl Runtime {
    /// Settings default to the environment (`DELAYQ_REDIS_URL`, `DELAYQ_NAMESPACE`), every
    /// registered listener, and a 30 s shutdown grace.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder {
            redis_url: None,
            namespace: None,
            topics: None,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

/// Settings for a runtime; finish with [`spawn`](RuntimeBuilder::spawn).
#[derive(Debug, Clone)]
pub struct RuntimeBuilder {
    redis_url: Option<String>,
    namespace: Option<String>,
    topics: Option<Vec<String>>,
    shutdown_grace: Duration,
}

impl RuntimeBuilder {
    /// The Redis URL (default: `DELAYQ_REDIS_URL`, else `redis://127.0.0.1:6379`).
    pub fn redis_url(mut self, url: impl Into<String>) -> Self {
        self.redis_url = Some(url.into());
        self
    }

    /// The key namespace (default: `DELAYQ_NAMESPACE`, else `delayq`).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Runs only the listeners of these topics.
    pub fn topics<I, S>(mut self, topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.topics = Some(topics.into_iter().map(Into::into).collect());
        self
    }

    /// How long shutdown lets running handlers finish before handing their messages back.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    fn selected(&self) -> Result<Vec<&'static ListenerRegistration>> {
        let all = all_listeners()?;
        let Some(wanted) = &self.topics else {
            if all.is_empty() {
                return Err(Error::Config(
                    "no #[delay_listener] functions are linked into this binary".into(),
                ));
            }
            return Ok(all);
        };
        let mut chosen = Vec::new();
        for topic in wanted {
            match all.iter().find(|r| r.topic == topic) {
                Some(r) => chosen.push(*r),
                None => {
                    return Err(Error::Config(format!(
                        "no #[delay_listener] handles topic {topic:?} in this binary"
                    )))
                }
            }
        }
        if chosen.is_empty() {
            return Err(Error::Config("topics([]) selects no listener".into()));
        }
        Ok(chosen)
    }

    /// Connects, checks the listeners, and starts the pools. Installs no signal handler.
    pub async fn spawn(self) -> Result<RuntimeHandle> {
        let listeners = self.selected()?;
        let (url, origin) = match &self.redis_url {
            Some(url) => (url.clone(), UrlOrigin::Builder),
            None => redis_url_from_env(),
        };
        let namespace = self.namespace.clone().unwrap_or_else(namespace_from_env);
        validate_namespace(&namespace)?;
        let conn = RedisConn::connect(&url, origin).await?;
        warn_without_persistence(&conn).await;
        let producer = delayq_core::protocol::producer(conn.clone(), &namespace);

        let stop = CancellationToken::new();
        let abort = CancellationToken::new();
        let mut topics = Vec::new();
        for registration in listeners {
            let keys = TopicKeys::new(&namespace, registration.topic)?;
            let queue = TopicQueue::new(conn.clone(), keys);
            topics.push(TopicRuntime::new(
                registration,
                queue,
                stop.clone(),
                abort.clone(),
            ));
        }
        let (subscribed, ready) = tokio::sync::oneshot::channel();
        let mut tasks = vec![tokio::spawn(run_subscriber(
            conn.client().clone(),
            topics.clone(),
            stop.clone(),
            subscribed,
        ))];
        tracing::info!(
            url = %conn.shown_url(),
            url_from = %origin,
            namespace = %namespace,
            topics = topics.len(),
            "delayq runtime starting"
        );
        for t in &topics {
            tasks.push(tokio::spawn(t.clone().run_boss()));
            tasks.push(tokio::spawn(t.clone().run_back()));
            // What this namespace holds for the topic: a producer writing under another
            // namespace shows up here as a topic with nothing in it.
            let found = producer.counts(&t.name).await.ok();
            tracing::info!(
                topic = %t.name,
                namespace = %namespace,
                function = t.registration.function,
                concurrency = t.options.concurrency,
                manual_ack = t.handler.manual(),
                delayed = found.map(|c| c.delayed),
                inflight = found.map(|c| c.inflight),
                dead = found.map(|c| c.dead),
                "listening"
            );
        }
        // Wake-ups published before the subscription is in place would be missed (bosses would
        // catch up only at their safety sleep), so return once it is.
        if tokio::time::timeout(SUBSCRIBE_WAIT, ready).await.is_err() {
            tracing::warn!("the wake-up subscription is not in place yet; new messages are found at the next safety check until it is");
        }
        Ok(RuntimeHandle {
            topics,
            tasks,
            producer,
            stop,
            abort,
            grace: self.shutdown_grace,
        })
    }
}

async fn warn_without_persistence(conn: &RedisConn) {
    let reply: redis::RedisResult<Vec<String>> = conn
        .run(|mut c| async move {
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("appendonly")
                .query_async(&mut c)
                .await
        })
        .await;
    match reply {
        Ok(v) if v.get(1).map(String::as_str) == Some("no") => tracing::warn!(
            "Redis has appendonly off: a Redis crash or restart can lose messages sent since its last snapshot. Set `appendonly yes` (and appendfsync) for durable delays"
        ),
        Ok(_) => {}
        Err(error) => tracing::debug!(%error, "could not read Redis' appendonly setting"),
    }
}

/// A running runtime. [`shutdown`](RuntimeHandle::shutdown) stops it gracefully; dropping it
/// stops it at once (claimed messages are then delivered again after their ack deadline).
pub struct RuntimeHandle {
    topics: Vec<Arc<TopicRuntime>>,
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
            .field("grace", &self.grace)
            .finish()
    }
}

impl RuntimeHandle {
    /// The topics this runtime serves.
    pub fn topics(&self) -> Vec<&str> {
        self.topics.iter().map(|t| &*t.name).collect()
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
        self.topics.iter().map(|t| t.tracked_claims()).sum()
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
            futures_util::future::join(pools, all_idle(&self.topics)),
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
            let _ = tokio::time::timeout(STRAGGLER_WAIT, all_idle(&self.topics)).await;
        }
        let hand_back_end = Instant::now() + HAND_BACK_WAIT;
        let (mut handed_back, mut unreturned) = (0, 0);
        for t in &self.topics {
            let unsettled = t.take_unsettled();
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

/// Resolves once no handler of any of `topics` runs.
async fn all_idle(topics: &[Arc<TopicRuntime>]) {
    let waits = topics.iter().map(|t| {
        let slots = t.slots.clone();
        let n = t.options.concurrency;
        async move { slots.acquire_many_owned(n).await.map(drop) }
    });
    futures_util::future::join_all(waits).await;
}

impl Drop for RuntimeHandle {
    fn drop(&mut self) {
        self.stop.cancel();
        self.abort.cancel();
    }
}

/// Waits for SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() -> Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).map_err(|source| Error::Signal {
            signal: "SIGTERM",
            source,
        })?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.map_err(|source| Error::Signal { signal: "SIGINT", source })?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .map_err(|source| Error::Signal {
            signal: "Ctrl-C",
            source,
        })?;
    Ok(())
}

/// Runs every `#[delay_listener]` in this binary, configured from the environment, until
/// SIGINT or SIGTERM; then shuts down gracefully (see [`RuntimeHandle::shutdown`]).
pub async fn start() -> Result<()> {
    let handle = Runtime::builder().spawn().await?;
    shutdown_signal().await?;
    tracing::info!("signal received; shutting down");
    handle.shutdown().await
}
