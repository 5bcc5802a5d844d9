//! What `#[stream_listener]` registers, and finding every stream listener linked in.

use std::sync::Arc;

use delayq_core::Error;

use super::message::StreamDelivery;
use crate::handler::ErasedHandler;
use crate::options::ListenerOptions;
use crate::registry::unique;

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
    /// The options the attribute wrote (the rest are defaults).
    pub given: &'static [&'static str],
    /// Builds the erased handler.
    pub handler: fn() -> Arc<dyn ErasedHandler<StreamDelivery>>,
}

inventory::collect!(StreamListenerRegistration);

/// A stream listener's effective settings: the attribute's, or the configuration's.
pub(crate) struct StreamSettings {
    pub(crate) options: ListenerOptions,
    /// The most entries one read asks for.
    pub(crate) batch: u32,
    /// A new group reads the stream from its first entry.
    pub(crate) from_start: bool,
}

/// Every stream listener; an error when two share a stream and group.
pub(crate) fn all_stream_listeners() -> Result<Vec<&'static StreamListenerRegistration>, Error> {
    unique(
        inventory::iter::<StreamListenerRegistration>,
        |r| format!("stream {:?} group {:?}", r.stream, r.group),
        |r| r.function,
    )
}
