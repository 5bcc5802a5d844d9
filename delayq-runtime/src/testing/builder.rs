//! [`TestRuntimeBuilder`]: which listeners a [`TestRuntime`] runs, and with which options;
//! `start` gives it a namespace of its own and spawns the runtime.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use delayq_core::config::ConfigValue;
use delayq_core::Result;

use super::server;
use super::TestRuntime;
use crate::delay::all_listeners;
use crate::runtime::Runtime;
use crate::schedule::all_schedules;

static NEXT: AtomicU64 = AtomicU64::new(0);

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
    /// [`Error::Config`](crate::Error::Config) when no `redis-server` is on PATH and `DELAYQ_TEST_REDIS_URL` is not set
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
