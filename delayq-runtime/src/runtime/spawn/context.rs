//! What every system's start shares: the connection, the producer, the tokens that stop
//! claiming and abort handlers, and the tasks started so far.

use std::future::Future;

use delayq_core::config::Kind;
use delayq_core::protocol::RedisConn;
use delayq_core::Producer;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::runtime::config::EffectiveConfig;

/// A runtime being spawned.
pub(super) struct Spawning {
    pub(super) conn: RedisConn,
    pub(super) namespace: String,
    pub(super) producer: Producer,
    /// Stop claiming (the start of a graceful shutdown).
    pub(super) stop: CancellationToken,
    /// Abort the handlers still running when the grace period ends.
    pub(super) abort: CancellationToken,
    /// Every task started, for the handle to wait on.
    pub(super) tasks: Vec<JoinHandle<()>>,
}

impl Spawning {
    /// Starts `task` as one of the runtime's tasks.
    pub(super) fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.push(tokio::spawn(task));
    }
}

/// A component's effective options in one line, for its start-up log.
pub(super) fn summary(config: &EffectiveConfig, kind: Kind, name: &str) -> String {
    config
        .components
        .iter()
        .find(|c| c.kind == kind && c.name == name)
        .map(|c| c.summary())
        .unwrap_or_default()
}
