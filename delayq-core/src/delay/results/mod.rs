//! Results and waits: what a message's handler returned, kept with its end for `result_ttl`,
//! and waits for a message to end that always have a timeout.
//!
//! - `outcome.rs`: [`Outcome`], how a message stands or ended, as `outcome.lua` answers it,
//!   and the producer's `result`; `keep.rs`: the consumer's ack that keeps a value
//!   (`ack_keep.lua`) and the topic's announcement of its result bounds (for `cancel`).
//! - `hub.rs`: the waits of one producer; `subscriber.rs`: its one subscriber connection
//!   (one a shard on a cluster) to the topics' end channels; `wait.rs`: `wait` and `send_and_wait`.
//!
//! The keys (the topic's `waits`, `results` and `results:by`) and the Lua are described under
//! "Ends" in `scripts/delay/prelude.lua`.

mod hub;
mod keep;
mod outcome;
mod recheck;
mod subscriber;
mod wait;
mod watch;

/// How `ids` of `keys`' topic stand (a read: no wait registered).
pub(crate) async fn outcomes_of(
    conn: &crate::connection::RedisConn,
    keys: &super::keys::TopicKeys,
    ids: &[crate::id::MessageId],
) -> crate::error::Result<Vec<Outcome<Vec<u8>>>> {
    outcome::outcomes(conn, keys, outcome::Register::No, ids).await
}
pub use outcome::{Outcome, Unfinished};
