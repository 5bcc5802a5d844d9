//! `Runtime::builder()`: the runtime's settings and which registrations it selects (spawning
//! them is spawn.rs).

use std::time::Duration;

use delayq_core::{Error, Result, RoomConfig};

use crate::delay::{all_listeners, ListenerRegistration};
use crate::leader::{all_leader_tasks, LeaderTaskRegistration};
use crate::schedule::{all_schedules, ScheduleRegistration};
use crate::stream::{all_stream_listeners, StreamListenerRegistration};

const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

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
    pub(super) redis_url: Option<String>,
    pub(super) namespace: Option<String>,
    pub(super) topics: Option<Vec<String>>,
    pub(super) streams: Option<Vec<String>>,
    pub(super) leader_tasks: Option<Vec<String>>,
    pub(super) schedules: Option<Vec<String>>,
    pub(super) rooms: Vec<(String, RoomConfig)>,
    pub(super) shutdown_grace: Duration,
    pub(super) gauges_every: Option<Duration>,
    #[cfg(feature = "prometheus")]
    pub(super) prometheus: Option<std::net::SocketAddr>,
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
            .get_or_insert(super::gauges::PROMETHEUS_GAUGES_EVERY);
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
