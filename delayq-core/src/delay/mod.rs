//! The delay queue: messages due at a time, claimed by listeners, acked, retried or
//! dead-lettered. A message is always in exactly one state, each a sorted set of its topic:
//! `delayed`, `inflight` or `dead` (messages due far ahead wait in far buckets, see
//! `scripts/delay/far.lua`). Every transition is one script, timed by Redis' clock.
//!
//! - `keys.rs`: a topic's keys; `envelope.rs`: what is stored under a message id.
//! - `scripts.rs`: the scripts (`scripts/delay/*.lua`) and a typed builder for each;
//!   `buckets.rs`: the far buckets a call declares; `call.rs`: running a topic's calls.
//! - `send_options.rs` and `send.rs`: the producer's sends, cancel, reschedule, counts.
//! - `queue.rs`: the consumer side (claim, ack, nack, extend, release, requeue) the runtime drives.
//! - `dead.rs`: dead letters; `inspect.rs`: the operator's reads (stats, peek).
//! - `ticks.rs`: a schedule's ticks, written fenced on its record (`scripts/delay/tick.lua`).
//! - `travel.rs` (feature `testing` only): the test kit's time travel.

mod buckets;
mod call;
mod dead;
mod envelope;
mod inspect;
mod keys;
mod pause;
mod queue;
mod scripts;
mod send;
mod send_options;
mod ticks;
#[cfg(feature = "testing")]
mod travel;

pub use dead::DeadLetter;
pub use envelope::Envelope;
pub use inspect::{Outcomes, PendingMessage, TopicStats};
pub use keys::TopicKeys;
pub use queue::{ClaimBatch, Delivery, NackOutcome, RequeueReport, TopicQueue, MAX_CLAIM_BATCH};
pub use scripts::{WAKE_BACK, WAKE_BOSS, WAKE_CLAIMED};
pub use send_options::{Cancelled, SendOptions, SendOutcome, TopicCounts, DEFAULT_REPLICA_TIMEOUT};
pub(crate) use ticks::Ticks;
pub use ticks::{send_ticks, state_of, MessageState, TickCall};
#[cfg(feature = "testing")]
pub use travel::{idle_state, travel};
