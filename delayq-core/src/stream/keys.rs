//! The keys of a stream and of a group's bookkeeping, and the fields delayq reads in an entry.

use crate::error::Result;
use crate::names::validate_name;

/// The field of an entry that holds its JSON payload.
pub const PAYLOAD_FIELD: &str = "payload";
/// The field that marks an entry replayed from the dead letters for one group only.
pub const REPLAY_FOR_FIELD: &str = "delayq-replay-for";

/// The keys of a stream and of one group's bookkeeping. The stream is the user's key, not
/// namespaced (other services write it); the others carry it as a hash tag, so that they share
/// its cluster slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamKeys {
    /// The stream.
    pub stream: String,
    /// The consumer group.
    pub group: String,
    /// `{<stream>}:dead`: the dead-letter stream (fields id, group, deliveries, reason,
    /// payload).
    pub dead: String,
    /// `{<stream>}:alive:<group>`: ZSET consumer → when its heartbeat expires (ms).
    pub alive: String,
    /// `{<stream>}:dead:bounds`: HASH group → `<dead_max> <dead_ttl ms>` of each group that
    /// trimmed the dead-letter stream, and `dropped` (dead letters dropped, in all).
    pub dead_bounds: String,
}

impl StreamKeys {
    /// The keys of `group` on `stream`; both names are checked by the topic rule.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a malformed stream or group name.
    pub fn new(stream: &str, group: &str) -> Result<Self> {
        validate_name("stream", stream)?;
        validate_name("group", group)?;
        Ok(StreamKeys {
            stream: stream.to_string(),
            group: group.to_string(),
            dead: dead_stream(stream),
            alive: format!("{{{stream}}}:alive:{group}"),
            dead_bounds: dead_bounds(stream),
        })
    }
}

/// The bounds its groups keep `stream`'s dead letters to, and the count dropped.
pub fn dead_bounds(stream: &str) -> String {
    format!("{{{stream}}}:dead:bounds")
}

/// The dead-letter stream of `stream`.
pub fn dead_stream(stream: &str) -> String {
    format!("{{{stream}}}:dead")
}
