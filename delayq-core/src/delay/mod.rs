//! The delay queue: messages due at a time, claimed by listeners, acked, retried or
//! dead-lettered. A message is always in exactly one state, each a sorted set of its topic:
//! `delayed`, `inflight` or `dead` (messages due far ahead wait in far buckets, see
//! `scripts/delay/far.lua`). Every transition is one script, timed by Redis' clock.
//!
//! - `keys.rs`: a topic's keys; `envelope.rs`: what is stored under a message id.
//! - `scripts.rs`: the scripts (`scripts/delay/*.lua`) and a typed builder for each (the
//!   operator's reads' in `read_scripts.rs`);
//!   `buckets.rs`: the far buckets a call declares; `call.rs`: running a topic's calls.
//! - `send_options.rs` and `send.rs`: the producer's sends, cancel, reschedule, counts.
//! - `queue.rs`: the consumer side (extend, release, requeue) the runtime drives; `claim.rs`:
//!   its claim and ack, which rides on a claim (`receipt.rs`: what an ack presents);
//!   `settle_failed.rs`: its nack and retry_after; `flow.rs`: the rate limit and dead-letter
//!   bounds its scripts enforce.
//! - `dead.rs`: dead letters; `inspect.rs`: the operator's reads (stats, peek); `find.rs`:
//!   where one message is; `history.rs`: a topic's history
//!   by the minute and the hour.
//! - `ticks.rs`: a schedule's ticks, written fenced on its record (`scripts/delay/tick.lua`).
//! - `results/`: results kept with a message's end, and waits for an end.
//! - `travel.rs` (feature `testing` only): the test kit's time travel.

mod buckets;
mod call;
mod claim;
mod dead;
mod due;
mod envelope;
mod find;
mod flow;
mod history;
mod inspect;
mod keys;
mod pause;
mod pending;
mod queue;
mod read_scripts;
mod receipt;
mod results;
mod scripts;
mod send;
mod send_options;
mod send_trusted;
mod settle_failed;
mod stats;
mod ticks;
#[cfg(feature = "testing")]
mod travel;

pub(crate) use call::first_foreign;
pub use claim::{ClaimBatch, Delivery};
pub use dead::DeadLetter;
pub use envelope::Envelope;
pub use find::{FoundMessage, Place};
pub use flow::Flow;
pub use inspect::PendingMessage;
pub use keys::TopicKeys;
pub use queue::{NackOutcome, RequeueReport, TopicQueue, DEAD_DROP_PER_CALL, MAX_CLAIM_BATCH};
pub use receipt::Receipt;
pub(crate) use results::outcomes_of;
pub use results::{Outcome, Unfinished};
pub use scripts::{WAKE_BACK, WAKE_BOSS, WAKE_CLAIMED, WAKE_TRAVEL};
pub use send_options::{
    Cancelled, Priority, SendOptions, SendOutcome, TopicCounts, DEFAULT_REPLICA_TIMEOUT,
    MAX_KEY_LEN,
};
pub(crate) use send_trusted::Trusted;
pub use stats::{Outcomes, TopicStats};
pub(crate) use ticks::Ticks;
pub use ticks::{send_ticks, state_of, MessageState, TickCall};
#[cfg(feature = "testing")]
pub use travel::{idle_state, travel};

/// The SHA1 of delay script `name` as loaded (`protocol::delay_script_hash`), the test kit's
/// `travel` and `idle` included when the feature `testing` is on.
pub(crate) fn script_hash(name: &str) -> Option<&'static str> {
    let found = scripts::SCRIPTS
        .named(name)
        .or_else(|| scripts::SWEEP_SCRIPTS.named(name));
    #[cfg(feature = "testing")]
    let found = found.or_else(|| travel::TRAVEL_SCRIPTS.named(name));
    found.map(|s| s.get_hash())
}
