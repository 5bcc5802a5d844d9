//! # delayq-core
//!
//! The Redis protocol of delayq: the key layout, one Lua script per state change of a
//! message, the envelope, the [`Producer`] and typed errors. It starts no tasks; the
//! `delayq-runtime` crate runs listeners on top of it.
//!
//! A message is always in exactly one state, each a sorted set of the topic:
//! `delayed` (waiting for its due time), `inflight` (claimed, with an ack deadline) or `dead`;
//! acked and cancelled messages are gone. Every transition is one script, timed by the Redis
//! server's clock.
#![warn(missing_docs)]

mod backend;
mod catalog;
mod conn;
mod connect;
mod dead;
mod deployment;
mod envelope;
mod error;
mod id;
mod inspect;
mod keys;
mod layout;
mod leader;
mod producer;
mod publish;
mod queue;
mod replicated;
mod room;
mod scripts;
mod send_options;
mod stream;
mod trace;

pub use connect::{UrlOrigin, DEFAULT_REDIS_URL, MIN_REDIS_VERSION};
pub use dead::DeadLetter;
pub use envelope::MAX_DUE_MS;
pub use error::{AckError, Error, Result};
pub use id::MessageId;
pub use inspect::{GroupStats, Outcomes, PendingMessage, StreamStats, TopicStats};
pub use keys::{validate_topic, DEFAULT_NAMESPACE};
pub use layout::LAYOUT_VERSION;
pub use leader::{LeaderLease, Leadership};
pub use producer::{Producer, DEFAULT_MAX_PAYLOAD};
pub use publish::{PublishOptions, StreamDeadLetter};
pub use room::{RoomConfig, RoomCounts, RoomStatus, TickReport, WaitingRoom};
pub use send_options::{Cancelled, SendOptions, SendOutcome, TopicCounts, DEFAULT_REPLICA_TIMEOUT};

/// The consumer side of the protocol, for `delayq-runtime` and delayq's own tests. Not a
/// public API: it changes without notice.
#[doc(hidden)]
pub mod protocol {
    pub use crate::conn::{AnyConn, RedisConn};
    pub use crate::connect::{namespace_from_env, redis_url_from_env, CA_FILE_VAR};
    pub use crate::deployment::{Deployment, SentinelSpec};
    pub use crate::envelope::{millis, ms_to_time, time_to_ms, Envelope};
    pub use crate::error::redact_url;
    pub use crate::keys::{registry_key, validate_namespace, Registered, TopicKeys};
    pub use crate::queue::{
        ClaimBatch, Delivery, NackOutcome, RequeueReport, TopicQueue, MAX_CLAIM_BATCH,
    };
    pub use crate::scripts::{WAKE_BACK, WAKE_BOSS};
    pub use crate::stream::{
        dead_stream, StreamEntry, StreamGroup, StreamKeys, TakeOver, TakeOverReport, PAYLOAD_FIELD,
        REPLAY_FOR_FIELD,
    };
    #[cfg(feature = "otel")]
    pub use crate::trace::parent_context;

    use crate::{Producer, Result};

    /// The consumer protocol of `topic` over `producer`'s connection.
    pub fn queue(producer: &Producer, topic: &str) -> Result<TopicQueue> {
        producer.queue(topic)
    }

    /// A producer over an open connection, under `namespace`.
    pub fn producer(conn: RedisConn, namespace: &str) -> Producer {
        Producer::over(conn, namespace)
    }
}
