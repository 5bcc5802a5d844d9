//! Stream listeners (`#[stream_listener]`): Redis Streams consumer groups with take-over of
//! idle entries, dead letters after `max_deliveries`, and consumer liveness.
//!
//! - `registration.rs`: what the macro registers; `message.rs`: `StreamMessage<T>` and how a
//!   handler is called with an entry.
//! - `listener.rs`: one listener at run time (what its reader, take-over and workers share)
//!   and the run of one entry.
//! - `reader.rs`: blocks in `XREADGROUP` for as many entries as there are free slots.
//! - `take_over.rs`: heartbeats and claims this consumer's share of idle entries.
//! - `claim.rs`: one delivery's hold on its entry (renew, ack, nack), with the books.

mod claim;
mod listener;
mod message;
pub(crate) mod reader;
mod registration;
pub(crate) mod take_over;

pub(crate) use listener::StreamRuntime;
pub use message::{erase_stream, StreamDelivery, StreamMessage};
pub use registration::StreamListenerRegistration;
pub(crate) use registration::{all_stream_listeners, StreamSettings};
