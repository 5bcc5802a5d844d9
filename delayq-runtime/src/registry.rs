//! Listener registrations, collected at link time with `inventory`.

use std::collections::HashMap;
use std::sync::Arc;

use delayq_core::Error;

use crate::handler::ErasedHandler;
use crate::options::ListenerOptions;

/// What `#[delay_listener]` registers.
pub struct ListenerRegistration {
    /// The topic.
    pub topic: &'static str,
    /// `module::path::function`, for messages.
    pub function: &'static str,
    /// The attribute's settings.
    pub options: ListenerOptions,
    /// Builds the erased handler.
    pub handler: fn() -> Arc<dyn ErasedHandler>,
}

inventory::collect!(ListenerRegistration);

/// Every listener linked into this binary; an error when two share a topic.
pub(crate) fn all_listeners() -> Result<Vec<&'static ListenerRegistration>, Error> {
    let mut by_topic: HashMap<&str, &'static ListenerRegistration> = HashMap::new();
    let mut all: Vec<&'static ListenerRegistration> = inventory::iter::<ListenerRegistration>
        .into_iter()
        .collect();
    all.sort_by_key(|r| (r.topic, r.function));
    for r in &all {
        if let Some(first) = by_topic.insert(r.topic, r) {
            return Err(Error::DuplicateListener {
                topic: r.topic.to_string(),
                first: first.function.to_string(),
                second: r.function.to_string(),
            });
        }
    }
    Ok(all)
}
