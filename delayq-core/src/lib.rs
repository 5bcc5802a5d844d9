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

mod connect;
mod dead;
mod envelope;
mod error;
mod id;
mod keys;
mod producer;
mod queue;
mod scripts;

pub use connect::{
    connect, namespace_from_env, open_client, redis_url_from_env, CA_FILE_VAR, DEFAULT_REDIS_URL,
};
pub use dead::DeadLetter;
pub use envelope::{ms_to_time, time_to_ms, Envelope};
pub use error::{redact_url, AckError, Error, Result};
pub use id::MessageId;
pub use keys::{validate_namespace, validate_topic, TopicKeys, DEFAULT_NAMESPACE};
pub use producer::{
    Cancelled, Producer, SendOptions, SendOutcome, TopicCounts, DEFAULT_MAX_PAYLOAD,
};
pub use queue::{ClaimBatch, Claimed, NackOutcome, RequeueReport, TopicQueue, MAX_CLAIM_BATCH};

/// The redis crate delayq is built on, for callers that need its types.
pub use redis;
