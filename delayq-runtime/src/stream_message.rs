//! `StreamMessage<T>`: a stream entry's payload with its delivery metadata.

use std::sync::Arc;

/// A delivered stream entry: the decoded payload and its metadata. Take it as a stream
/// listener's first parameter instead of `T` when the handler needs the entry id or the
/// delivery count.
#[derive(Debug, Clone)]
pub struct StreamMessage<T> {
    pub(crate) id: Arc<str>,
    pub(crate) stream: Arc<str>,
    pub(crate) group: Arc<str>,
    pub(crate) deliveries: u32,
    pub(crate) payload: T,
}

impl<T> StreamMessage<T> {
    /// The entry id (`<ms>-<seq>`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The stream.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The consumer group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// How often the entry has been delivered to the group: 1 on the first delivery.
    pub fn deliveries(&self) -> u32 {
        self.deliveries
    }

    /// The payload.
    pub fn payload(&self) -> &T {
        &self.payload
    }

    /// The payload, by value.
    pub fn into_payload(self) -> T {
        self.payload
    }
}

/// An entry read or taken over by a stream listener, as a handler is called with it.
pub struct StreamDelivery {
    pub(crate) stream: Arc<str>,
    pub(crate) group: Arc<str>,
    pub(crate) entry: delayq_core::protocol::StreamEntry,
}
