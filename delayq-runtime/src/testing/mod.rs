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

mod builder;
mod cleanup;
mod server;
mod travel;

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use delayq_core::protocol::idle_state;
use delayq_core::{DeadLetter, Error, Outcomes, PendingMessage, Producer, Result};

pub use builder::TestRuntimeBuilder;
pub use server::TEST_REDIS_URL_VAR;
pub use travel::MAX_TICKS_PER_ADVANCE;

use crate::runtime::RuntimeHandle;
use cleanup::delete_namespace;

/// How long `run_until_idle` waits by default.
pub const IDLE_WAIT: Duration = Duration::from_secs(10);

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
