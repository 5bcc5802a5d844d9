//! Test your own listeners on real Redis, with time travel (feature `testing`; nothing of it
//! exists without the feature, and production code pays nothing for it).
//!
//! ```no_run
//! # use std::time::Duration;
//! # use delayq_runtime::{delay_listener, testing::TestRuntime};
//! # #[derive(serde::Serialize, serde::Deserialize)] struct OrderTimeout { order_id: u64 }
//! # #[delay_listener(topic = "order.timeout")] async fn close(_m: OrderTimeout) {}
//! # async fn t() -> Result<(), delayq_runtime::Error> {
//! let t = TestRuntime::start().await?;     // real redis-server, a namespace of its own
//! t.producer().send("order.timeout", &OrderTimeout { order_id: 7 }, Duration::from_secs(1800)).await?;
//! t.advance(Duration::from_secs(1800)).await?; // all due within 30 min is due now, in due order
//! t.run_until_idle().await?;                   // nothing due, claimed or running
//! assert_eq!(t.handled("order.timeout").await?.ok, 1);
//! # Ok(()) }
//! ```
//!
//! - Redis: `DELAYQ_TEST_REDIS_URL` when set, else one throwaway `redis-server` from `PATH` per
//!   test binary, on a free loopback port, gone when the binary exits.
//! - Each `TestRuntime` has a namespace of its own, so tests in one binary run in parallel and
//!   never see each other's messages; it runs the binary's `#[delay_listener]`s and
//!   `#[scheduled]` fns (narrow with `.topics([..])` and `.schedules([..])`; stream listeners
//!   and leader tasks are not run). Dropping it stops them and deletes its keys.
//! - `advance(d)`: `d` passes for everything that waits (delayed messages, far ones, retry
//!   backoffs, the ticks of its schedules and of dynamic schedules on its topics): what was
//!   due within `d` is due now, in due order, and the rest is `d` nearer; advances add up.
//!   `Message::due_at()` and `Tick::scheduled_at()` still report the original times. Claims
//!   in flight keep their ack deadlines; a message sent after an advance counts its delay from
//!   then.

mod server;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use delayq_core::config::ConfigValue;
use delayq_core::protocol::{idle_state, tick_id, travel, Produced};
use delayq_core::{DeadLetter, Error, MessageId, Outcomes, PendingMessage, Producer, Result};

pub use server::TEST_REDIS_URL_VAR;

use crate::delay::all_listeners;
use crate::runtime::{Runtime, RuntimeHandle};
use crate::schedule::all_schedules;

/// The most ticks of one schedule an advance writes: an advance of years over a frequent
/// schedule is refused with an error saying so, rather than writing millions of ticks.
pub const MAX_TICKS_PER_ADVANCE: usize = 100_000;

/// How long `run_until_idle` waits by default.
pub const IDLE_WAIT: Duration = Duration::from_secs(10);

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A runtime for one test: real Redis, its own namespace, time travel. See the module docs.
pub struct TestRuntime {
    handle: Option<RuntimeHandle>,
    producer: Producer,
    url: String,
    namespace: String,
    topics: Vec<String>,
    /// Time passed in advances so far (ms).
    offset_ms: AtomicU64,
}

/// Which listeners a [`TestRuntime`] runs, and with which options.
#[derive(Default, Clone)]
pub struct TestRuntimeBuilder {
    topics: Option<Vec<String>>,
    schedules: Option<Vec<String>>,
    streams: Vec<String>,
    leader_tasks: Vec<String>,
    sets: Vec<(String, ConfigValue)>,
}

impl std::fmt::Debug for TestRuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRuntimeBuilder")
            .field("topics", &self.topics)
            .field("schedules", &self.schedules)
            .field("streams", &self.streams)
            .field("leader_tasks", &self.leader_tasks)
            .field(
                "sets",
                &self.sets.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl TestRuntimeBuilder {
    /// Runs only the `#[delay_listener]`s of these topics (and, unless `.schedules(..)` says
    /// otherwise, no `#[scheduled]` fn).
    pub fn topics<I, S>(mut self, topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.topics = Some(topics.into_iter().map(Into::into).collect());
        self
    }

    /// Also runs the `#[stream_listener]`s of these streams (none by default). Streams are
    /// Redis keys other services write, not namespaced: give each test its own stream names,
    /// or run such tests one at a time.
    pub fn streams<I, S>(mut self, streams: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.streams = streams.into_iter().map(Into::into).collect();
        self
    }

    /// Also runs these `#[leader_task]`s (none by default); their lease is the test's own
    /// namespace's, so parallel tests each have a leader.
    pub fn leader_tasks<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.leader_tasks = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets one option for this test, as [`RuntimeBuilder::set`](crate::RuntimeBuilder::set)
    /// does: `.set(r#"listeners."order.timeout".max_attempts"#, 1)`. (A delayq.toml or
    /// `DELAYQ_` variables never reach a test; this is how a test runs what it deploys.)
    pub fn set(mut self, key: &str, value: impl Into<ConfigValue>) -> Self {
        self.sets.push((key.to_string(), value.into()));
        self
    }

    /// Runs only these `#[scheduled]` fns (and, unless `.topics(..)` says otherwise, no
    /// `#[delay_listener]`).
    pub fn schedules<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.schedules = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Starts it (and the binary's Redis, the first time). Fails when there is no Redis to
    /// use (the error says what to install), or as `Runtime::builder().spawn()` fails.
    ///
    /// # Errors
    /// [`Error::Config`] when no `redis-server` is on PATH and `DELAYQ_TEST_REDIS_URL` is not set
    /// (saying how to get one); what [`RuntimeBuilder::spawn`](crate::RuntimeBuilder::spawn)
    /// returns.
    pub async fn start(self) -> Result<TestRuntime> {
        let url = server::redis_url()?;
        // Random too: containers sharing DELAYQ_TEST_REDIS_URL can have the same pid.
        let namespace = format!(
            "test-{}-{}-{:08x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            fastrand::u32(..)
        );
        let (topics, schedules) = match (self.topics, self.schedules) {
            (None, None) => (
                all_listeners()?
                    .iter()
                    .map(|r| r.topic.to_string())
                    .collect(),
                all_schedules()?
                    .iter()
                    .map(|r| r.name.to_string())
                    .collect(),
            ),
            (t, s) => (t.unwrap_or_default(), s.unwrap_or_default()),
        };
        let mut builder = Runtime::builder();
        // A test runs the attributes' options: a delayq.toml or DELAYQ_ variables meant for
        // a deployment do not reach it.
        builder.external_config = false;
        let mut builder = builder
            .redis_url(&url)
            .namespace(&namespace)
            .topics(topics.clone())
            .schedules(schedules.clone())
            .leader_tasks(self.leader_tasks)
            .streams(self.streams)
            .shutdown_grace(Duration::from_secs(1));
        for (key, value) in self.sets {
            builder = builder.set(&key, value);
        }
        let handle = builder.spawn().await?;
        let mut topics = topics;
        topics.extend(schedules);
        Ok(TestRuntime {
            producer: handle.producer(),
            handle: Some(handle),
            url,
            namespace,
            topics,
            offset_ms: AtomicU64::new(0),
        })
    }
}

impl TestRuntime {
    /// Every `#[delay_listener]` and `#[scheduled]` fn of the test binary, in a namespace of
    /// its own.
    ///
    /// # Errors
    /// [`Error::Config`] when no `redis-server` is on PATH and `DELAYQ_TEST_REDIS_URL` is not set
    /// (saying how to get one); what [`RuntimeBuilder::spawn`](crate::RuntimeBuilder::spawn)
    /// returns.
    pub async fn start() -> Result<TestRuntime> {
        TestRuntime::builder().start().await
    }

    /// Choose what it runs.
    pub fn builder() -> TestRuntimeBuilder {
        TestRuntimeBuilder::default()
    }

    /// A producer on its Redis and namespace.
    pub fn producer(&self) -> Producer {
        self.producer.clone()
    }

    /// The Redis it uses (the binary's throwaway server, or `DELAYQ_TEST_REDIS_URL`).
    pub fn redis_url(&self) -> &str {
        &self.url
    }

    /// Its namespace (`test-<pid>-<n>-<random>`).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `d` passes for everything that waits: every due time moves `d` earlier (delayed
    /// messages, far ones, retry backoffs, and the ticks of its schedules and of dynamic
    /// schedules on its topics), so what was due within `d` is due now, in due order, and the
    /// rest is `d` nearer; advances add up. Handlers see the original due times; claims in
    /// flight keep their ack deadlines. Returns once they are due (call
    /// [`run_until_idle`](Self::run_until_idle) to let them run).
    ///
    /// # Errors
    /// [`Error::Redis`] when the test's Redis does not answer; [`Error::Config`] when `d`
    /// passes more than [`MAX_TICKS_PER_ADVANCE`] ticks of one schedule.
    pub async fn advance(&self, d: Duration) -> Result<()> {
        self.travel(d, false).await
    }

    /// [`advance`](Self::advance), and the ack deadlines of every claim in flight pass `d`
    /// too: a manual-ack handler that returned without acking, or a handler that hangs, is
    /// delivered again as if `d` had passed. A handler still running is treated as one that
    /// outlived its ack timeout: its message is delivered again alongside it, as in
    /// production when a handler outlives its lease. Use it once the handlers you mean to
    /// time out have returned, or to test that your handler copes with a redelivery.
    ///
    /// # Errors
    /// [`Error::Redis`] when the test's Redis does not answer.
    pub async fn advance_with_claims(&self, d: Duration) -> Result<()> {
        self.travel(d, true).await
    }

    async fn travel(&self, d: Duration, claims: bool) -> Result<()> {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 4);
        // Time passed in earlier advances: a tick written now at its nominal time is that
        // much nearer already.
        let before = self.offset_ms.fetch_add(ms, Ordering::SeqCst);
        let lead = before + ms;
        let now = self.producer.redis_now_ms().await?;
        let mut ticks: HashMap<String, Vec<MessageId>> = HashMap::new();
        for (name, topic) in self.producer.schedule_index().await? {
            if !self.topics.contains(&topic) {
                continue;
            }
            let Some(mut state) = self.producer.schedule_state_at(&name, &topic).await? else {
                continue;
            };
            let mut of_this = 0usize;
            loop {
                match self.producer.produce_ticks(&mut state, now, lead).await? {
                    Produced::Ticks { ticks: written, .. } => {
                        of_this += written.len();
                        let ids = ticks.entry(topic.clone()).or_default();
                        ids.extend(written.iter().map(|t| tick_id(&name, *t)));
                        if state.next > now + lead {
                            break;
                        }
                        if of_this >= MAX_TICKS_PER_ADVANCE {
                            return Err(Error::Config(format!(
                                "advance({d:?}) passes more than {MAX_TICKS_PER_ADVANCE} ticks of schedule {name:?}: advance less at a time, or leave the schedule out (TestRuntime::builder().schedules([..])); the {of_this} written so far wait at their times"
                            )));
                        }
                    }
                    // Refreshed from the record: go on from its next tick.
                    Produced::Stale => {}
                    Produced::Changed => {
                        match self.producer.schedule_state_at(&name, &topic).await? {
                            Some(fresh) => state = fresh,
                            None => break,
                        }
                    }
                    Produced::Gone | Produced::NotYet => break,
                }
            }
        }
        for topic in &self.topics {
            let written = ticks.get(topic).map(Vec::as_slice).unwrap_or_default();
            travel(&self.producer, topic, ms, written, before, claims).await?;
        }
        Ok(())
    }

    /// Waits until nothing is due, claimed or running on any of its topics, at most
    /// [`IDLE_WAIT`]; the error names what is still pending.
    ///
    /// # Errors
    /// [`Error::Config`] after [`IDLE_WAIT`] naming what is still due or claimed;
    /// [`Error::Redis`].
    pub async fn run_until_idle(&self) -> Result<()> {
        self.run_until_idle_within(IDLE_WAIT).await
    }

    /// [`run_until_idle`](Self::run_until_idle), waiting at most `limit`.
    ///
    /// # Errors
    /// [`Error::Config`] after `limit` naming what is still due or claimed; [`Error::Redis`].
    pub async fn run_until_idle_within(&self, limit: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let mut busy = Vec::new();
            for topic in &self.topics {
                let (due, claimed) = idle_state(&self.producer, topic).await?;
                if due > 0 || claimed > 0 {
                    busy.push(format!("{topic}: {due} due, {claimed} claimed or running"));
                }
            }
            if busy.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Config(format!(
                    "not idle after {limit:?}: {}",
                    busy.join("; ")
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Handler outcomes of `topic` (the counters the scripts keep for the last minute or two).
    ///
    /// # Errors
    /// [`Error::InvalidTopic`]; [`Error::Redis`].
    pub async fn handled(&self, topic: &str) -> Result<Outcomes> {
        Ok(self.producer.topic_stats(topic).await?.last_minute)
    }

    /// The dead letters of `topic`, oldest first (the first 1,000).
    ///
    /// # Errors
    /// [`Error::InvalidTopic`]; [`Error::Redis`].
    pub async fn dead_letters(&self, topic: &str) -> Result<Vec<DeadLetter>> {
        self.producer.dead_letters(topic, 0..1_000).await
    }

    /// The messages of `topic` waiting for their time, next due first (the first 1,000).
    ///
    /// # Errors
    /// [`Error::InvalidTopic`]; [`Error::Redis`].
    pub async fn pending(&self, topic: &str) -> Result<Vec<PendingMessage>> {
        self.producer.peek(topic, 0..1_000).await
    }

    /// Stops its listeners gracefully, then deletes its keys.
    ///
    /// # Errors
    /// [`Error::Unreturned`], as [`RuntimeHandle::shutdown`](crate::RuntimeHandle::shutdown);
    /// [`Error::Redis`] when its keys cannot be deleted.
    pub async fn shutdown(mut self) -> Result<()> {
        let stopped = match self.handle.take() {
            Some(handle) => handle.shutdown().await,
            None => Ok(()),
        };
        // Deleted however the shutdown went.
        delete_namespace(&self.url, &self.namespace);
        stopped
    }
}

impl Drop for TestRuntime {
    fn drop(&mut self) {
        // Dropping the handle stops its tasks at their next await.
        if self.handle.take().is_none() {
            return;
        }
        delete_namespace(&self.url, &self.namespace);
        // A task cut off mid-call may still write once: delete again once they are gone.
        let (url, namespace) = (self.url.clone(), self.namespace.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            delete_namespace(&url, &namespace);
        });
    }
}

/// Deletes every key of `namespace` (best effort: a test's end must not fail on it), on every
/// primary of the deployment: the server, each primary of a cluster, or the primary the
/// sentinels name.
fn delete_namespace(url: &str, namespace: &str) {
    use delayq_core::protocol::Deployment;
    let primaries: Vec<redis::ConnectionInfo> = match Deployment::parse(url) {
        Ok(Deployment::Single(one)) => {
            redis::IntoConnectionInfo::into_connection_info(one.as_str())
                .into_iter()
                .collect()
        }
        Ok(Deployment::Cluster(seeds)) => cluster_primaries(&seeds),
        Ok(Deployment::Sentinel(spec)) => sentinel_primary(&spec).into_iter().collect(),
        Err(_) => Vec::new(),
    };
    for info in primaries {
        let Ok(mut c) = redis::Client::open(info)
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        else {
            continue;
        };
        let pattern = format!("{namespace}:*");
        let keys: Vec<String> = match redis::Commands::scan_match::<_, String>(&mut c, &pattern) {
            Ok(iter) => iter.filter_map(|k| k.ok()).collect(),
            Err(_) => continue,
        };
        // One key a command: a cluster refuses a DEL across slots.
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.cmd("DEL").arg(key).ignore();
        }
        let _: redis::RedisResult<()> = pipe.query(&mut c);
    }
}

/// Every primary of a cluster, as the first seed that answers lists them (with the seed's
/// credentials and TLS).
fn cluster_primaries(seeds: &[String]) -> Vec<redis::ConnectionInfo> {
    for seed in seeds {
        let Ok(info) = redis::IntoConnectionInfo::into_connection_info(seed.as_str()) else {
            continue;
        };
        let Ok(mut c) = redis::Client::open(info.clone())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        else {
            continue;
        };
        let Ok(nodes) = redis::cmd("CLUSTER").arg("NODES").query::<String>(&mut c) else {
            continue;
        };
        return nodes
            .lines()
            .filter(|l| l.split(' ').nth(2).is_some_and(|f| f.contains("master")))
            .filter_map(|l| {
                let addr = l.split(' ').nth(1)?.split('@').next()?;
                let (host, port) = addr.rsplit_once(':')?;
                let host = if host.is_empty() { "127.0.0.1" } else { host };
                let node = match info.addr() {
                    redis::ConnectionAddr::TcpTls {
                        insecure,
                        tls_params,
                        ..
                    } => redis::ConnectionAddr::TcpTls {
                        host: host.to_string(),
                        port: port.parse().ok()?,
                        insecure: *insecure,
                        tls_params: tls_params.clone(),
                    },
                    _ => redis::ConnectionAddr::Tcp(host.to_string(), port.parse().ok()?),
                };
                Some(info.clone().set_addr(node))
            })
            .collect();
    }
    Vec::new()
}

/// The primary the first sentinel that answers names, with the data nodes' credentials.
fn sentinel_primary(spec: &delayq_core::protocol::SentinelSpec) -> Option<redis::ConnectionInfo> {
    for sentinel in &spec.sentinels {
        let Ok(mut c) = redis::Client::open(sentinel.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        else {
            continue;
        };
        let Ok((host, port)) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&spec.master)
            .query::<(String, u16)>(&mut c)
        else {
            continue;
        };
        let scheme = if spec.tls { "rediss" } else { "redis" };
        let auth = match (&spec.username, &spec.password) {
            (Some(u), Some(p)) => format!("{u}:{p}@"),
            (None, Some(p)) => format!(":{p}@"),
            _ => String::new(),
        };
        return redis::IntoConnectionInfo::into_connection_info(
            format!("{scheme}://{auth}{host}:{port}").as_str(),
        )
        .ok();
    }
    None
}
