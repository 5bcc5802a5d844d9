//! Registrations of listeners and leader tasks, collected at link time with `inventory`.

use std::collections::HashMap;
use std::sync::Arc;

use delayq_core::Error;

use crate::handler::{ErasedHandler, LeaderTaskFn};
use crate::message::TopicDelivery;
use crate::options::ListenerOptions;
use crate::stream_message::StreamDelivery;

/// What `#[delay_listener]` registers.
pub struct ListenerRegistration {
    /// The topic.
    pub topic: &'static str,
    /// `module::path::function`, for messages.
    pub function: &'static str,
    /// The attribute's settings.
    pub options: ListenerOptions,
    /// Builds the erased handler.
    pub handler: fn() -> Arc<dyn ErasedHandler<TopicDelivery>>,
}

/// What `#[stream_listener]` registers.
pub struct StreamListenerRegistration {
    /// The stream's key.
    pub stream: &'static str,
    /// The consumer group.
    pub group: &'static str,
    /// A new group reads the stream from its first entry, not only new ones.
    pub from_start: bool,
    /// The most entries one read asks for.
    pub batch: u32,
    /// `module::path::function`, for messages.
    pub function: &'static str,
    /// The attribute's settings: `max_attempts` is max_deliveries, `ack_timeout_ms` min_idle.
    pub options: ListenerOptions,
    /// Builds the erased handler.
    pub handler: fn() -> Arc<dyn ErasedHandler<StreamDelivery>>,
}

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
    /// Builds the erased task.
    pub task: fn() -> LeaderTaskFn,
}

inventory::collect!(ListenerRegistration);
inventory::collect!(StreamListenerRegistration);
inventory::collect!(LeaderTaskRegistration);

/// Every registration of one kind, sorted by `key`; an error naming both functions when two
/// share a key.
fn unique<R: 'static>(
    all: impl IntoIterator<Item = &'static R>,
    key: impl Fn(&R) -> String,
    function: impl Fn(&R) -> &'static str,
) -> Result<Vec<&'static R>, Error> {
    let mut all: Vec<&'static R> = all.into_iter().collect();
    all.sort_by_key(|r| (key(r), function(r)));
    let mut by_key: HashMap<String, &'static R> = HashMap::new();
    for r in &all {
        if let Some(first) = by_key.insert(key(r), r) {
            return Err(Error::DuplicateListener {
                topic: key(r),
                first: function(first).to_string(),
                second: function(r).to_string(),
            });
        }
    }
    Ok(all)
}

/// Every delay listener linked into this binary; an error when two share a topic.
pub(crate) fn all_listeners() -> Result<Vec<&'static ListenerRegistration>, Error> {
    unique(
        inventory::iter::<ListenerRegistration>,
        |r| format!("topic {:?}", r.topic),
        |r| r.function,
    )
}

/// Every stream listener; an error when two share a stream and group.
pub(crate) fn all_stream_listeners() -> Result<Vec<&'static StreamListenerRegistration>, Error> {
    unique(
        inventory::iter::<StreamListenerRegistration>,
        |r| format!("stream {:?} group {:?}", r.stream, r.group),
        |r| r.function,
    )
}

/// Every leader task; an error when two share a name.
pub(crate) fn all_leader_tasks() -> Result<Vec<&'static LeaderTaskRegistration>, Error> {
    unique(
        inventory::iter::<LeaderTaskRegistration>,
        |r| format!("leader task {:?}", r.name),
        |r| r.function,
    )
}
