//! `Runtime::builder()`: the runtime's settings and which registrations it selects (spawning
//! them is spawn/).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq_core::config::{ConfigValue, Parsed, SecretUrl};
use delayq_core::{Error, Result, RoomConfig};

use crate::delay::{all_listeners, ListenerRegistration};
use crate::leader::{all_leader_tasks, LeaderTaskRegistration};
use crate::schedule::{all_schedules, ScheduleRegistration};
use crate::stream::{all_stream_listeners, StreamListenerRegistration};

pub(super) const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

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
            schedules: None,
            rooms: Vec::new(),
            shutdown_grace: None,
            gauges_every: None,
            prometheus: None,
            health: None,
            sets: Vec::new(),
            config_file: None,
            external_config: true,
            shutdown_on: None,
        }
    }
}

/// Settings for a runtime; finish with [`spawn`](RuntimeBuilder::spawn).
#[derive(Debug, Clone)]
pub struct RuntimeBuilder {
    pub(super) redis_url: Option<SecretUrl>,
    pub(super) namespace: Option<String>,
    pub(super) topics: Option<Vec<String>>,
    pub(super) streams: Option<Vec<String>>,
    pub(super) leader_tasks: Option<Vec<String>>,
    pub(super) schedules: Option<Vec<String>>,
    pub(super) rooms: Vec<(String, RoomConfig)>,
    pub(super) shutdown_grace: Option<Duration>,
    pub(super) gauges_every: Option<Duration>,
    pub(super) prometheus: Option<std::net::SocketAddr>,
    pub(super) health: Option<std::net::SocketAddr>,
    /// `set(key, value)` calls, checked at spawn.
    pub(super) sets: Vec<(String, ConfigValue)>,
    pub(super) config_file: Option<PathBuf>,
    /// Whether the file and the environment are read (the test kit reads neither).
    pub(crate) external_config: bool,
    /// Taken by the first spawn; clones of the builder share it.
    pub(super) shutdown_on: Option<ShutdownOn>,
}

/// A shutdown signal.
pub(super) type Signal = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The future `shutdown_on` was given, shared by the builder's clones.
#[derive(Clone)]
pub(super) struct ShutdownOn(pub(super) Arc<Mutex<Option<Signal>>>);

impl std::fmt::Debug for ShutdownOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShutdownOn(..)")
    }
}

/// What a runtime runs: the registrations it selected.
pub(super) struct Selection {
    pub(super) topics: Vec<&'static ListenerRegistration>,
    pub(super) streams: Vec<&'static StreamListenerRegistration>,
    pub(super) leader_tasks: Vec<&'static LeaderTaskRegistration>,
    pub(super) schedules: Vec<&'static ScheduleRegistration>,
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
        self.redis_url = Some(SecretUrl::new(url));
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

    /// Runs only these `#[scheduled]` fns (by schedule name).
    pub fn schedules<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.schedules = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Ticks waiting room `name` with `config` (every `config.tick`), under a lease so that
    /// of all the processes ticking it only one admits at a time.
    pub fn waiting_room(mut self, name: impl Into<String>, config: RoomConfig) -> Self {
        self.rooms.push((name.into(), config));
        self
    }

    /// How long shutdown lets running handlers finish before handing their messages back
    /// (default 30 s; also `shutdown_grace` in the file, `DELAYQ_SHUTDOWN_GRACE`).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = Some(grace);
        self
    }

    /// Sets one option by its key in the file's syntax, over the environment, the file and
    /// the attribute: `.set(r#"listeners."order.timeout".concurrency"#, 64)`,
    /// `.set("schedules.daily-report.tz", "Europe/Berlin")`, `.set("namespace", "shop")`.
    /// Checked at [`spawn`](Self::spawn), which refuses an unknown key or a bad value with an
    /// error naming it and the nearest valid name.
    pub fn set(mut self, key: &str, value: impl Into<ConfigValue>) -> Self {
        self.sets.push((key.to_string(), value.into()));
        self
    }

    /// Reads the configuration from this file instead of the one `DELAYQ_CONFIG` names or
    /// `./delayq.toml`. [`spawn`](Self::spawn) fails when it cannot be read or has problems.
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config_file = Some(path.into());
        self
    }

    /// Serves `GET /health/live` and `GET /health/ready` at `addr` (200 or 503, a JSON body:
    /// [`RuntimeHandle::health`](crate::RuntimeHandle::health)); on the same listener as
    /// `prometheus(..)` (feature `prometheus`) when that is on. [`spawn`](Self::spawn) fails when the
    /// address cannot be bound.
    pub fn health(mut self, addr: std::net::SocketAddr) -> Self {
        self.health = Some(addr);
        self
    }

    /// Shuts the runtime down gracefully (as [`RuntimeHandle::shutdown`](crate::RuntimeHandle::shutdown))
    /// when `signal` completes: the application's own signal handling can then stop its HTTP
    /// server and the runtime together. [`RuntimeHandle::stopped`](crate::RuntimeHandle::stopped)
    /// waits for that shutdown and returns its result. With it, dropping the handle leaves the
    /// runtime running until the signal.
    pub fn shutdown_on(mut self, signal: impl Future<Output = ()> + Send + 'static) -> Self {
        self.shutdown_on = Some(ShutdownOn(Arc::new(Mutex::new(Some(Box::pin(signal))))));
        self
    }

    /// The runtime options the builder's own methods set.
    pub(super) fn runtime_values(&self) -> Vec<(&'static str, Parsed)> {
        let ms = |d: Duration| Parsed::Ms(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut values = Vec::new();
        if let Some(url) = &self.redis_url {
            values.push(("redis_url", Parsed::RedisUrl(url.clone())));
        }
        if let Some(ns) = &self.namespace {
            values.push(("namespace", Parsed::Text(ns.clone())));
        }
        if let Some(grace) = self.shutdown_grace {
            values.push(("shutdown_grace", ms(grace)));
        }
        if let Some(every) = self.gauges_every {
            values.push(("gauges_every", ms(every)));
        }
        if let Some(addr) = self.prometheus {
            values.push(("prometheus", Parsed::Addr(addr)));
        }
        if let Some(addr) = self.health {
            values.push(("health", Parsed::Addr(addr)));
        }
        values
    }

    /// Refreshes the `delayq_pending` and `delayq_dead` gauges from Redis every `every` (a
    /// few reads per topic and stream each time). Off by default, so that an idle runtime
    /// sends Redis nothing; `prometheus(..)` (feature `prometheus`) turns it on at 10 s.
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
        self
    }

    /// Without `topics`, `streams`, `leader_tasks` or `schedules`, everything registered in
    /// the binary; with any of them, only what they name.
    pub(super) fn selected(&self) -> Result<Selection> {
        let none = self.topics.is_none()
            && self.streams.is_none()
            && self.leader_tasks.is_none()
            && self.schedules.is_none();
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
            schedules: pick(
                all_schedules()?,
                self.schedules.as_ref(),
                none,
                |r| r.name,
                "#[scheduled] schedule is named",
            )?,
        };
        if selection.topics.is_empty()
            && selection.streams.is_empty()
            && selection.leader_tasks.is_empty()
            && selection.schedules.is_empty()
            && self.rooms.is_empty()
        {
            return Err(Error::Config(if none {
                "no #[delay_listener], #[stream_listener], #[leader_task] or #[scheduled] functions are linked into this binary".into()
            } else {
                "the selection (topics, streams, leader_tasks, schedules) selects nothing to run"
                    .into()
            }));
        }
        Ok(selection)
    }
}
