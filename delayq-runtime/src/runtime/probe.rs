//! Health: whether Redis answers, and per listener whether it runs, is switched off by
//! configuration, or fails (since when, and why); live and ready as orchestrators ask them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use delayq_core::config::Kind;
use delayq_core::protocol::RedisConn;
use serde::{Serialize, Serializer};
use tokio::task::AbortHandle;

use super::config::ComponentConfig;
use crate::delay::TopicRuntime;
use crate::health::Health as Watch;
use crate::schedule::FailingSchedules;
use crate::stream::StreamRuntime;

/// How long a health check waits for Redis to answer its `PING`: under Kubernetes' default
/// probe timeout of 1 s, so that a frozen Redis gets a 503 rather than a timed-out probe.
const PING_TIMEOUT: Duration = Duration::from_millis(800);
/// Checks this close together share one `PING`: a flood of probes costs Redis little.
const PING_REUSE: Duration = Duration::from_millis(250);
/// What readiness includes unless `ready_checks` says otherwise: nothing outside the process.
/// A service binary's replicas all see the same Redis, so a Redis blip that made them unready
/// would take every one out of its load balancer at once — for requests that may never touch
/// Redis — and nothing a replica could do would bring it back sooner; delayq reconnects by
/// itself either way (Spring Boot leaves external checks out of readiness for this reason).
pub(crate) const DEFAULT_READY_CHECKS: &str = "none";

/// What `/health/ready` (and [`Health::ready`]) requires besides a running runtime that is not
/// stopping: `ready_checks = "redis"` (Redis answers `PING` within 800 ms), `"listeners"`
/// (no listener is failing), both, or `"none"` (the default).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ReadyChecks {
    redis: bool,
    listeners: bool,
}

impl ReadyChecks {
    /// From the option's checked text.
    pub(crate) fn from_option(text: &str) -> Self {
        ReadyChecks {
            redis: text.split(',').any(|w| w == "redis"),
            listeners: text.split(',').any(|w| w == "listeners"),
        }
    }
}

/// A runtime's health: what [`RuntimeHandle::health`](crate::RuntimeHandle::health) returns
/// and `GET /health/ready` serves as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    /// The runtime's tasks are alive (none ended by a panic); what `/health/live` answers.
    pub live: bool,
    /// No shutdown has begun, the runtime's tasks run, and what `ready_checks` names holds
    /// (Redis answers; no enabled listener is failing; by default neither is required); what
    /// `/health/ready` answers.
    pub ready: bool,
    /// A shutdown has begun.
    pub stopping: bool,
    /// Whether Redis answers.
    pub redis: RedisHealth,
    /// Every listener, stream listener, schedule and leader task the runtime selected.
    pub listeners: Vec<ListenerHealth>,
    /// The schedules this runtime would produce whose records it cannot use (edited by hand,
    /// or written by a newer delayq), by name: it skips them and produces the others. They do
    /// not count against readiness (no restart or rerouting mends a record; `delayq schedules`
    /// shows them too).
    pub failing_schedules: Vec<FailingSchedule>,
}

/// A schedule whose record its runtime cannot use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailingSchedule {
    /// The schedule's name.
    pub name: String,
    /// Since when the runtime finds it so (serialized as Unix milliseconds).
    #[serde(serialize_with = "unix_ms")]
    pub since: SystemTime,
    /// What is wrong with it.
    pub error: String,
}

/// Whether Redis answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RedisHealth {
    /// It answered the last check.
    Up,
    /// It has not answered since `since`.
    Down {
        /// When the runtime first found it gone (serialized as Unix milliseconds).
        #[serde(serialize_with = "unix_ms")]
        since: SystemTime,
        /// The first error.
        error: String,
    },
}

/// One listener's health.
#[derive(Debug, Clone, Serialize)]
pub struct ListenerHealth {
    /// What it is.
    pub kind: Kind,
    /// Its topic, `stream/group`, or name.
    pub name: String,
    /// How it is.
    #[serde(flatten)]
    pub state: ListenerState,
}

/// How one listener is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ListenerState {
    /// It runs.
    Running,
    /// `enabled = false` switched it off; it does not count against readiness.
    Disabled,
    /// Its Redis calls fail since `since`; it retries with backoff.
    Failing {
        /// Since when (serialized as Unix milliseconds).
        #[serde(serialize_with = "unix_ms")]
        since: SystemTime,
        /// The first error.
        error: String,
    },
}

fn unix_ms<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let ms = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    s.serialize_u64(ms)
}

/// What a component's health is read from.
enum Watched {
    Disabled,
    Topic(Arc<TopicRuntime>),
    Stream(Arc<StreamRuntime>),
    /// Leader tasks: alive with the runtime's tasks.
    Running,
}

/// What health is read from, shared by the handle and the health endpoint.
pub(crate) struct Probe {
    conn: RedisConn,
    /// Redis as the wake-up subscription and the checks' `PING`s find it.
    redis: Arc<Watch>,
    components: Vec<(Kind, String, Watched)>,
    schedules: Option<Arc<FailingSchedules>>,
    tasks: Mutex<Vec<AbortHandle>>,
    stopping: AtomicBool,
    checks: ReadyChecks,
    /// When the last `PING` ended; held while one is in flight, so that checks arriving
    /// meanwhile take its answer rather than queue up to send one each.
    last_ping: tokio::sync::Mutex<Option<tokio::time::Instant>>,
}

impl Probe {
    /// Watches Redis through `redis`, and each component of `components` through its pool
    /// (`topics` for delay listeners and schedules, `streams`).
    pub(crate) fn new(
        conn: RedisConn,
        redis: Arc<Watch>,
        components: &[ComponentConfig],
        (topics, streams): (&[Arc<TopicRuntime>], &[Arc<StreamRuntime>]),
        checks: ReadyChecks,
        schedules: Option<Arc<FailingSchedules>>,
    ) -> Self {
        let watched = |c: &ComponentConfig| {
            if !c.enabled {
                return Watched::Disabled;
            }
            let topic = topics
                .iter()
                .find(|t| matches!(c.kind, Kind::Listener | Kind::Schedule) && *t.name == c.name);
            let stream = streams.iter().find(|s| {
                c.kind == Kind::Stream && format!("{}/{}", s.stream, s.group_name) == c.name
            });
            match (topic, stream) {
                (Some(t), _) => Watched::Topic(t.clone()),
                (_, Some(s)) => Watched::Stream(s.clone()),
                _ => Watched::Running,
            }
        };
        Probe {
            conn,
            redis,
            components: components
                .iter()
                .map(|c| (c.kind, c.name.clone(), watched(c)))
                .collect(),
            schedules,
            tasks: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            checks,
            last_ping: tokio::sync::Mutex::new(None),
        }
    }

    pub(crate) fn tasks(&self, tasks: impl IntoIterator<Item = AbortHandle>) {
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(tasks);
    }

    pub(crate) fn stopping(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// Asks Redis (`PING`, within 800 ms), then reads every component. Checks share one
    /// `PING`: one in flight answers every check that arrives meanwhile, and one that ended
    /// within 250 ms answers the next, so no check waits for more than one `PING` however
    /// many arrive at once.
    pub(crate) async fn check(&self) -> Health {
        let asked = tokio::time::Instant::now();
        let mut last = self.last_ping.lock().await;
        // Health always says how Redis is (a runtime without delay listeners has no other
        // way to notice it gone); readiness counts it only when `ready_checks` names it.
        let fresh = last.is_some_and(|ended| ended >= asked || ended.elapsed() < PING_REUSE);
        if !fresh {
            let ping = self.conn.run(|mut c| async move {
                redis::cmd("PING").query_async::<redis::Value>(&mut c).await
            });
            match tokio::time::timeout(PING_TIMEOUT, ping).await {
                Ok(Ok(_)) => self.redis.ok(),
                Ok(Err(e)) => self.redis.failed(&e),
                Err(_) => self.redis.failed(&"Redis did not answer PING within 800ms"),
            }
            *last = Some(tokio::time::Instant::now());
        }
        drop(last);
        self.current()
    }

    /// The health as last seen, without asking Redis: what `/health/live` answers, since
    /// whether the process lives does not depend on Redis, and a liveness probe that waited
    /// on a frozen Redis would get the process restarted for Redis' trouble.
    pub(crate) fn current(&self) -> Health {
        let stopping = self.stopping.load(Ordering::Relaxed);
        let redis = match self.redis.failing_since() {
            None => RedisHealth::Up,
            Some((since, error)) => RedisHealth::Down { since, error },
        };
        let failing = |w: &Watch| match w.failing_since() {
            None => ListenerState::Running,
            Some((since, error)) => ListenerState::Failing { since, error },
        };
        let listeners: Vec<ListenerHealth> = self
            .components
            .iter()
            .map(|(kind, name, watched)| ListenerHealth {
                kind: *kind,
                name: name.clone(),
                state: match watched {
                    Watched::Disabled => ListenerState::Disabled,
                    Watched::Topic(t) => failing(&t.health),
                    Watched::Stream(s) => failing(&s.health),
                    Watched::Running => ListenerState::Running,
                },
            })
            .collect();
        let tasks_alive = self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .all(|t| !t.is_finished());
        let live = stopping || tasks_alive;
        let ready = !stopping
            && tasks_alive
            && (!self.checks.redis || redis == RedisHealth::Up)
            && (!self.checks.listeners
                || listeners
                    .iter()
                    .all(|l| matches!(l.state, ListenerState::Running | ListenerState::Disabled)));
        let failing_schedules = self
            .schedules
            .as_ref()
            .map(|s| s.all())
            .unwrap_or_default()
            .into_iter()
            .map(|(name, since, error)| FailingSchedule { name, since, error })
            .collect();
        Health {
            live,
            ready,
            stopping,
            redis,
            listeners,
            failing_schedules,
        }
    }
}
