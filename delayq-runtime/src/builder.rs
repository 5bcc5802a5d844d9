//! `Runtime::builder()…spawn()`: connect, find the listeners, start the pools.

use std::time::Duration;

use delayq_core::protocol::{
    namespace_from_env, redis_url_from_env, validate_namespace, RedisConn, TopicQueue,
};
use delayq_core::{Error, Result, UrlOrigin};
use tokio_util::sync::CancellationToken;

use crate::handle::RuntimeHandle;
use crate::registry::{all_listeners, ListenerRegistration};
use crate::topic::TopicRuntime;
use crate::wake::run_subscriber;
use crate::{back, boss};

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
            let keys = conn.topic_keys(&namespace, registration.topic)?;
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
            conn.clone(),
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
            tasks.push(tokio::spawn(boss::run(t.clone())));
            tasks.push(tokio::spawn(back::run(t.clone())));
            // What this namespace holds for the topic: a producer writing under another
            // namespace shows up here as a topic with nothing in it.
            let found = producer.counts(&t.name).await.ok();
            tracing::info!(
                topic = %t.name,
                namespace = %namespace,
                function = t.registration.function,
                concurrency = t.options.concurrency,
                ack_mode = t.handler.mode(),
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
        Ok(RuntimeHandle::new(
            topics,
            tasks,
            producer,
            (stop, abort),
            self.shutdown_grace,
        ))
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
