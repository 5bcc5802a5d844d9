//! `Message<T>`: a payload with its delivery metadata.

use std::sync::Arc;
use std::time::SystemTime;

use delayq_core::protocol::ms_to_time;
use delayq_core::MessageId;
use serde::de::DeserializeOwned;

use crate::handler::{erased, payload, Decode, ErasedHandler, Handler, Inbound, ViaMessage};

/// A delivered message: the decoded payload and its metadata. Take it as a listener's first
/// parameter instead of `T` when the handler needs the id, attempt or times.
#[derive(Debug, Clone)]
pub struct Message<T> {
    pub(crate) id: MessageId,
    pub(crate) topic: Arc<str>,
    pub(crate) attempt: u32,
    pub(crate) due_at: SystemTime,
    pub(crate) enqueued_at: SystemTime,
    pub(crate) payload: T,
}

impl<T> Message<T> {
    /// The message id.
    pub fn id(&self) -> &MessageId {
        &self.id
    }

    /// The topic it was sent to.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Which delivery this is: 1 on the first.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// When it was due (Redis' clock).
    pub fn due_at(&self) -> SystemTime {
        self.due_at
    }

    /// When it was sent (Redis' clock).
    pub fn enqueued_at(&self) -> SystemTime {
        self.enqueued_at
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

/// A claimed message of a topic, as a handler is called with it.
pub struct TopicDelivery {
    pub(crate) topic: Arc<str>,
    pub(crate) delivery: delayq_core::protocol::Delivery,
    /// Its topic's queue (a flow step reads its dependencies through it).
    pub(crate) queue: delayq_core::protocol::TopicQueue,
}

impl Inbound for TopicDelivery {
    fn payload(&self) -> Result<&[u8], String> {
        Ok(&self.delivery.envelope.payload)
    }
}

impl<T: DeserializeOwned + Send + 'static> Decode<ViaMessage, TopicDelivery> for Message<T> {
    fn decode(inbound: &TopicDelivery) -> Result<Self, String> {
        let delivery = &inbound.delivery;
        let envelope = &delivery.envelope;
        Ok(Message {
            id: delivery.id.clone(),
            topic: inbound.topic.clone(),
            attempt: envelope.attempt,
            due_at: ms_to_time(envelope.due_ms),
            enqueued_at: ms_to_time(envelope.enqueued_ms),
            payload: payload(inbound)?,
        })
    }
}

/// Erases a delay listener's marker. Called by the code `#[delay_listener]` generates.
pub fn erase<F: Handler<TopicDelivery, Args>, Args: 'static>(
    f: F,
) -> Arc<dyn ErasedHandler<TopicDelivery>> {
    erased(f)
}
