//! What `#[delay_listener]` registers, and finding every delay listener linked in.

use std::sync::Arc;

use delayq_core::Error;

use super::message::TopicDelivery;
use crate::handler::ErasedHandler;
use crate::options::ListenerOptions;
use crate::registry::unique;

/// What `#[delay_listener]` registers.
pub struct ListenerRegistration {
    /// The topic.
    pub topic: &'static str,
    /// `module::path::function`, for messages.
    pub function: &'static str,
    /// The attribute's settings.
    pub options: ListenerOptions,
    /// The options the attribute wrote (the rest are defaults).
    pub given: &'static [&'static str],
    /// Builds the erased handler.
    pub handler: fn() -> Arc<dyn ErasedHandler<TopicDelivery>>,
}

inventory::collect!(ListenerRegistration);

/// Every delay listener linked into this binary; an error when two share a topic.
pub(crate) fn all_listeners() -> Result<Vec<&'static ListenerRegistration>, Error> {
    unique(
        inventory::iter::<ListenerRegistration>,
        |r| format!("topic {:?}", r.topic),
        |r| r.function,
    )
}
