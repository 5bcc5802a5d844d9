//! Redis Streams consumer groups: a stream's keys, the calls one consumer of a group makes
//! (read, ack, take over, dead-letter), publishing, and the operator's reads. Every state
//! change beyond a plain read is one script (`scripts/stream/*.lua`).
//!
//! - `keys.rs`: the stream's and its group's keys, the fields delayq reads.
//! - `reply.rs`: parsing `XREADGROUP` and take-over replies in place.
//! - `group.rs`: [`StreamGroup`], one consumer's calls; `take_over.rs`: its take-over step.
//! - `publish.rs`: the producer's side (publish, dead letters, replay).
//! - `inspect.rs`: a stream's length, dead letters and groups.

mod group;
mod history;
mod inspect;
mod keys;
mod publish;
mod reply;
mod take_over;

pub use group::StreamGroup;
pub use inspect::{GroupStats, StreamStats};
pub use keys::{dead_stream, StreamKeys, PAYLOAD_FIELD, REPLAY_FOR_FIELD};
pub use publish::{PublishOptions, StreamDeadLetter};
pub use reply::StreamEntry;
pub use take_over::{TakeOver, TakeOverReport};
