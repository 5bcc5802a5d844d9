//! Delay listeners (`#[delay_listener]`): per topic three pools over the topic's sorted sets.
//!
//! - `registration.rs`: what the macro registers; `message.rs`: `Message<T>` and how a
//!   handler is called with a claimed message.
//! - `topic.rs`: one topic at run time (what its pools share) and the run of one message.
//! - `boss.rs`: claims as many as there are free slots (up to two calls on their way while
//!   more is due, acks riding on them), and sleeps until the next due time (`sleep.rs`).
//! - `back.rs`: re-delivers claims whose ack deadline passed, by the earliest deadline.
//! - `claim.rs`: one delivery's hold on its message (renew, ack, nack), with the books.
//! - `dependencies.rs`: a flow step's `Dependencies` parameter.
//! - `wake.rs`: the pub/sub subscriber that wakes a topic's boss or back pool.

pub(crate) mod back;
pub(crate) mod boss;
mod claim;
mod dependencies;
pub(crate) mod ends;
mod message;
mod registration;
mod sleep;
mod topic;
mod wake;

pub use dependencies::{Dependencies, DependencyError};
pub use message::{erase, Message, TopicDelivery};
pub(crate) use registration::all_listeners;
pub use registration::ListenerRegistration;
pub(crate) use topic::TopicRuntime;
pub(crate) use wake::run_subscriber;
