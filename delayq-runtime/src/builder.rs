//! `Runtime::builder()…spawn()`: connect, find the listeners, start the pools.

use std::time::Duration;

use delayq_core::protocol::{
    namespace_from_env, redis_url_from_env, validate_namespace, RedisConn, StreamGroup, TopicQueue,
};
use delayq_core::{Error, Result, RoomConfig, UrlOrigin, WaitingRoom};
use tokio_util::sync::CancellationToken;

use crate::handle::RuntimeHandle;
use crate::registry::{
    all_leader_tasks, all_listeners, all_stream_listeners, LeaderTaskRegistration,
    ListenerRegistration, StreamListenerRegistration,
};
use crate::stream::StreamRuntime;
use crate::topic::TopicRuntime;
use crate::wake::run_subscriber;
use crate::{back, boss, leader_task, stream_reader, take_over};

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
            streams: None,
            leader_tasks: None,
            rooms: Vec::new(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            gauges_every: None,
            #[cfg(feature = "prometheus")]
            prometheus: None,
        }
    }
}

/// Settings for a runtime; finish with [`spawn`](RuntimeBuilder::spawn).
#[derive(Debug, Clone)]
pub struct RuntimeBuilder {
    redis_url: Option<String>,
    namespace: Option<String>,
    topics: Option<Vec<String>>,
    streams: Option<Vec<String>>,
    leader_tasks: Option<Vec<String>>,
    rooms: Vec<(String, RoomConfig)>,
    shutdown_grace: Duration,
    gauges_every: Option<Duration>,
    #[cfg(feature = "prometheus")]
    prometheus: Option<std::net::SocketAddr>,
}

/// What a runtime runs: the registrations it selected.
struct Selection {
    topics: Vec<&'static ListenerRegistration>,
    streams: Vec<&'static StreamListenerRegistration>,
    leader_tasks: Vec<&'static LeaderTaskRegistration>,
}

/// The registrations of one kind named in `wanted` (each name must match one), or all of them
/// when nothing was selected at all.
fn pick<R>(
    all: Vec<&'static R>,
    wanted: Option<&Vec<String>>,
    nothing_selected: bool,
    name: impl Fn(&R) -> &str,
    what: &str,
) -> Result<Vec<&'static R>> {
    let Some(wanted) = wanted else {
        return Ok(if nothing_selected { all } else { Vec::new() });
    };
    let mut chosen = Vec::new();
    for w in wanted {
        let before = chosen.len();
        chosen.extend(all.iter().filter(|r| name(r) == w));
        if chosen.len() == before {
            return Err(Error::Config(format!("no {what} {w:?} in this binary")));
        }
    }
    Ok(chosen)
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

    /// Runs only the stream listeners of these streams (every group of each).
    pub fn streams<I, S>(mut self, streams: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.streams = Some(streams.into_iter().map(Into::into).collect());
        self
    }

    /// Runs only these leader tasks (by name).
    pub fn leader_tasks<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.leader_tasks = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Ticks waiting room `name` with `config` (every `config.tick`), under a lease so that
    /// of all the processes ticking it only one admits at a time.
    pub fn waiting_room(mut self, name: impl Into<String>, config: RoomConfig) -> Self {
        self.rooms.push((name.into(), config));
        self
    }

    /// How long shutdown lets running handlers finish before handing their messages back.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Refreshes the `delayq_pending` and `delayq_dead` gauges from Redis every `every` (a
    /// few reads per topic and stream each time). Off by default, so that an idle runtime
    /// sends Redis nothing; [`prometheus`](Self::prometheus) turns it on at 10 s.
    pub fn gauges_every(mut self, every: Duration) -> Self {
        self.gauges_every = Some(every.max(Duration::from_secs(1)));
        self
    }

    /// Serves the runtime's metrics for Prometheus at `http://<addr>/metrics` (feature
    /// `prometheus`). Installs the process's metrics recorder, so `spawn` fails when one is
    /// installed already.
    #[cfg(feature = "prometheus")]
    pub fn prometheus(mut self, addr: std::net::SocketAddr) -> Self {
        self.prometheus = Some(addr);
        self.gauges_every
            .get_or_insert(crate::gauges::PROMETHEUS_GAUGES_EVERY);
        self
    }

    /// Without `topics`, `streams` or `leader_tasks`, everything registered in the binary;
    /// with any of them, only what they name.
    fn selected(&self) -> Result<Selection> {
        let none = self.topics.is_none() && self.streams.is_none() && self.leader_tasks.is_none();
        let selection = Selection {
            topics: pick(
                all_listeners()?,
                self.topics.as_ref(),
                none,
                |r| r.topic,
                "#[delay_listener] handles topic",
            )?,
            streams: pick(
                all_stream_listeners()?,
                self.streams.as_ref(),
                none,
                |r| r.stream,
                "#[stream_listener] reads stream",
            )?,
            leader_tasks: pick(
                all_leader_tasks()?,
                self.leader_tasks.as_ref(),
                none,
                |r| r.name,
                "#[leader_task] is named",
            )?,
        };
        if selection.topics.is_empty()
            && selection.streams.is_empty()
            && selection.leader_tasks.is_empty()
            && self.rooms.is_empty()
        {
            return Err(Error::Config(if none {
                "no #[delay_listener], #[stream_listener] or #[leader_task] functions are linked into this binary".into()
            } else {
                "the selection (topics, streams, leader_tasks) selects nothing to run".into()
            }));
        }
        Ok(selection)
    }

    /// Connects, checks the listeners, and starts the pools. Installs no signal handler.
    pub async fn spawn(self) -> Result<RuntimeHandle> {
        let selection = self.selected()?;
        let (url, origin) = match &self.redis_url {
            Some(url) => (url.clone(), UrlOrigin::Builder),
            None => redis_url_from_env(),
        };
        let namespace = self.namespace.clone().unwrap_or_else(namespace_from_env);
        validate_namespace(&namespace)?;
        let conn = RedisConn::connect(&url, origin).await?;
        warn_without_persistence(&conn).await;
        let producer = delayq_core::protocol::producer(conn.clone(), &namespace);
        producer.check_layout().await?;
        // Before any metric handle is made: handles keep the recorder they were made with.
        #[cfg(feature = "prometheus")]
        if let Some(addr) = self.prometheus {
            crate::meter::install_prometheus(addr)?;
            tracing::info!(%addr, "serving Prometheus metrics at /metrics");
        }
        for r in &selection.topics {
            producer.register_topic(r.topic).await?;
        }
        for r in &selection.streams {
            producer.register_stream(r.stream).await?;
        }

        let stop = CancellationToken::new();
        let abort = CancellationToken::new();
        let mut topics = Vec::new();
        for registration in selection.topics {
            let keys = conn.topic_keys(&namespace, registration.topic)?;
            let queue = TopicQueue::new(conn.clone(), keys);
            topics.push(TopicRuntime::new(
                registration,
                queue,
                stop.clone(),
                abort.clone(),
            ));
        }
        let consumer = consumer_name();
        let mut streams = Vec::new();
        for registration in selection.streams {
            let group = StreamGroup::new(
                conn.clone(),
                registration.stream,
                registration.group,
                &consumer,
            )?;
            // Before spawn returns, so that what is published after it reaches a new group
            // that starts from `$`.
            if group.create(registration.from_start).await? {
                tracing::info!(
                    stream = registration.stream,
                    group = registration.group,
                    "created the consumer group"
                );
            }
            streams.push(StreamRuntime::new(
                registration,
                group,
                stop.clone(),
                abort.clone(),
            ));
        }
        let (subscribed, ready) = tokio::sync::oneshot::channel();
        let mut tasks = Vec::new();
        if !topics.is_empty() {
            tasks.push(tokio::spawn(run_subscriber(
                conn.clone(),
                topics.clone(),
                stop.clone(),
                subscribed,
            )));
        }
        tracing::info!(
            url = %conn.shown_url(),
            url_from = %origin,
            namespace = %namespace,
            topics = topics.len(),
            streams = streams.len(),
            leader_tasks = selection.leader_tasks.len(),
            "delayq runtime starting"
        );
        for s in &streams {
            tasks.push(tokio::spawn(stream_reader::run(s.clone(), conn.clone())));
            tasks.push(tokio::spawn(take_over::run(s.clone())));
            tracing::info!(
                stream = %s.stream,
                group = %s.group_name,
                consumer = %s.group.consumer(),
                function = s.registration.function,
                concurrency = s.options.concurrency,
                ack_mode = s.handler.mode(),
                "consuming"
            );
        }
        for (name, config) in &self.rooms {
            let room = WaitingRoom::new(&producer, name, *config)?;
            room.register().await?;
            tracing::info!(room = %name, tick = ?config.tick_every(), "ticking the waiting room");
            tasks.push(tokio::spawn(leader_task::tick_room(room, stop.clone())));
        }
        for registration in selection.leader_tasks {
            tasks.push(tokio::spawn(leader_task::run(
                registration,
                producer.clone(),
                stop.clone(),
            )));
            tracing::info!(
                task = registration.name,
                function = registration.function,
                every_ms = registration.every_ms,
                "contending for the leader lease"
            );
        }
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
        if let Some(every) = self.gauges_every {
            tasks.push(tokio::spawn(crate::gauges::run(
                producer.clone(),
                (topics.clone(), streams.clone()),
                every,
                stop.clone(),
            )));
        }
        // Wake-ups published before the subscription is in place would be missed (bosses would
        // catch up only at their safety sleep), so return once it is.
        if !topics.is_empty() && tokio::time::timeout(SUBSCRIBE_WAIT, ready).await.is_err() {
            tracing::warn!("the wake-up subscription is not in place yet; new messages are found at the next safety check until it is");
        }
        Ok(RuntimeHandle::new(
            (topics, streams),
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

/// A consumer name unique to this process: host, pid and a random suffix (a restarted process
/// is a new consumer; the old one is removed from the group once it is gone and holds nothing).
fn consumer_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
                .take(64)
                .collect::<String>()
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_string());
    format!("{host}-{}-{:04x}", std::process::id(), fastrand::u16(..))
}
