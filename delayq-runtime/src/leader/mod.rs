//! Leader tasks (`#[leader_task]`): each runs on exactly one process of the namespace at a
//! time, every `every`, under a leader lease (the loop is the shared `crate::under_lease`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::{Error, LeaderLease, Leadership, Producer};
use tokio_util::sync::CancellationToken;

use crate::handler::{HandlerFuture, ListenerReturn};
use crate::registry::unique;
use crate::under_lease::run_under_lease;

/// What `#[leader_task]` registers.
pub struct LeaderTaskRegistration {
    /// The lease's name.
    pub name: &'static str,
    /// `module::path::function`, for messages.
    pub function: &'static str,
    /// How often the leader runs it (ms).
    pub every_ms: u64,
    /// The lease's length (ms).
    pub ttl_ms: u64,
    /// The options the attribute wrote (the rest are defaults).
    pub given: &'static [&'static str],
    /// Builds the erased task.
    pub task: fn() -> LeaderTaskFn,
}

inventory::collect!(LeaderTaskRegistration);

/// Every leader task; an error when two share a name.
pub(crate) fn all_leader_tasks() -> Result<Vec<&'static LeaderTaskRegistration>, Error> {
    unique(
        inventory::iter::<LeaderTaskRegistration>,
        |r| format!("leader task {:?}", r.name),
        |r| r.function,
    )
}

/// A leader task, erased: starts one run.
pub type LeaderTaskFn = Arc<dyn Fn(Leadership) -> HandlerFuture + Send + Sync>;

/// Erases a leader task. Called by the code `#[leader_task]` generates.
pub fn erase_leader<F, Fut>(f: F) -> LeaderTaskFn
where
    F: Fn(Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: ListenerReturn,
{
    Arc::new(move |leadership| {
        let fut = f(leadership);
        Box::pin(async move { fut.await.into_result() })
    })
}

/// Runs one `#[leader_task]` until `stop`, then releases the lease if it holds it.
pub(crate) async fn run(
    registration: &'static LeaderTaskRegistration,
    (every_ms, ttl_ms): (u64, u64),
    producer: Producer,
    stop: CancellationToken,
) {
    let ttl = Duration::from_millis(ttl_ms);
    let every = Duration::from_millis(every_ms);
    let lease = match LeaderLease::new(&producer, registration.name, ttl) {
        Ok(lease) => lease,
        Err(error) => {
            tracing::error!(%error, task = registration.name, "leader task cannot run");
            return;
        }
    };
    let task = (registration.task)();
    run_under_lease(registration.name, lease, every, move |l| task(l), stop).await;
}
