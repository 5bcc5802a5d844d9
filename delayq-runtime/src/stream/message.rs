//! `StreamMessage<T>`: a stream entry's payload with its delivery metadata.

use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::handler::{erased, payload, Decode, ErasedHandler, Handler, Inbound, ViaMessage};

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

impl Inbound for StreamDelivery {
    fn payload(&self) -> Result<&[u8], String> {
        self.entry
            .payload
            .as_deref()
            .ok_or_else(|| "the entry has no `payload` field".to_string())
    }
}

impl<T: DeserializeOwned + Send + 'static> Decode<ViaMessage, StreamDelivery> for StreamMessage<T> {
    fn decode(inbound: &StreamDelivery) -> Result<Self, String> {
        Ok(StreamMessage {
            id: inbound.entry.id.clone(),
            stream: inbound.stream.clone(),
            group: inbound.group.clone(),
            deliveries: inbound.entry.deliveries,
            payload: payload(inbound)?,
        })
    }
}

/// Erases a stream listener's marker. Called by the code `#[stream_listener]` generates.
pub fn erase_stream<F: Handler<StreamDelivery, Args>, Args: 'static>(
    f: F,
) -> Arc<dyn ErasedHandler<StreamDelivery>> {
    erased(f)
}
