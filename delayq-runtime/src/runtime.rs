//! `Runtime::builder()…spawn()`, `RuntimeHandle::shutdown`, and `start()`.

use std::sync::Arc;
use std::time::Duration;

use delayq_core::{
    connect, namespace_from_env, open_client, redis_url_from_env, validate_namespace, Error,
    Result, TopicKeys, TopicQueue, MAX_CLAIM_BATCH,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::registry::{all_listeners, ListenerRegistration};
use crate::topic::TopicRuntime;
use crate::wake::run_subscriber;

const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(5);

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
        let url = self.redis_url.clone().unwrap_or_else(redis_url_from_env);
        let namespace = self.namespace.clone().unwrap_or_else(namespace_from_env);
        validate_namespace(&namespace)?;
        let conn = connect(&url).await?;
        warn_without_persistence(conn.clone()).await;
        let client = open_client(&url)?;

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
            client,
            topics.clone(),
            stop.clone(),
            subscribed,
        ))];
        for t in &topics {
            tasks.push(tokio::spawn(t.clone().run_boss()));
            tasks.push(tokio::spawn(t.clone().run_back()));
            tracing::info!(
                topic = %t.name,
                function = t.registration.function,
                concurrency = t.options.concurrency,
                manual_ack = t.handler.manual(),
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
            stop,
            abort,
            grace: self.shutdown_grace,
        })
    }
}

async fn warn_without_persistence(mut conn: redis::aio::ConnectionManager) {
    let reply: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query_async(&mut conn)
        .await;
    match reply {
        Ok(v) if v.get(1).map(String::as_str) == Some("no") => tracing::warn!(
            "Redis has appendonly off: a Redis crash or restart can lose messages sent since its last snapshot. Set `appendonly yes` (and appendfsync) for durable delays"
        ),
        Ok(_) => {}
        Err(e) => tracing::debug!(%e, "could not read Redis' appendonly setting"),
    }
}

/// A running runtime. [`shutdown`](RuntimeHandle::shutdown) stops it gracefully; dropping it
/// stops it at once (claimed messages are then delivered again after their ack deadline).
pub struct RuntimeHandle {
    topics: Vec<Arc<TopicRuntime>>,
    tasks: Vec<JoinHandle<()>>,
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

    /// Stops claiming, lets running handlers finish within the grace period, then hands every
    /// claimed-but-unfinished message back to its topic at once, without using up an attempt.
    pub async fn shutdown(mut self) -> Result<()> {
        self.stop.cancel();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        let all_idle = |topics: &[Arc<TopicRuntime>]| {
            let waits: Vec<_> = topics
                .iter()
                .map(|t| {
                    let slots = t.slots.clone();
                    let n = t.options.concurrency;
                    async move { slots.acquire_many_owned(n).await.map(drop) }
                })
                .collect();
            futures_util::future::join_all(waits)
        };
        let finished = tokio::time::timeout(self.grace, all_idle(&self.topics))
            .await
            .is_ok();
        self.abort.cancel();
        if !finished {
            // Aborted workers return at once; give stragglers a moment.
            let _ = tokio::time::timeout(Duration::from_secs(5), all_idle(&self.topics)).await;
        }
        let mut first_error = None;
        let mut handed_back = 0;
        for t in &self.topics {
            let unsettled = t.take_unsettled();
            for chunk in unsettled.chunks(MAX_CLAIM_BATCH) {
                match t.queue.release(chunk).await {
                    Ok(n) => handed_back += n,
                    Err(e) => {
                        tracing::error!(topic = %t.name, %e, count = chunk.len(), "could not hand claimed messages back; they are delivered again after their ack deadline");
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        tracing::info!(
            handed_back,
            grace_exceeded = !finished,
            "delayq runtime stopped"
        );
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
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
        let mut term = signal(SignalKind::terminate())
            .map_err(|e| Error::Config(format!("cannot listen for SIGTERM: {e}")))?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.map_err(|e| Error::Config(format!("cannot listen for Ctrl-C: {e}")))?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .map_err(|e| Error::Config(format!("cannot listen for Ctrl-C: {e}")))?;
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
