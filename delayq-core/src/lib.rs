//! # delayq-core
//!
//! The Redis protocol of delayq: for each system its keys, its Lua scripts (one per state
//! change) and its calls, over one connection layer, with the [`Producer`] as the handle users
//! hold and typed errors. It starts no tasks; the `delayq-runtime` crate runs listeners on top.
//!
//! The tree, systems first (each imports only the shared parts below it, never another system):
//!
//! | folder | what |
//! |---|---|
//! | `delay/` | the delay queue: send, claim, ack, retry, dead letters, far buckets, stats |
//! | `stream/` | Redis Streams consumer groups: read, take over, dead letters, publish |
//! | `room/` | the waiting room: an admission queue for traffic peaks |
//! | `schedule/` | recurring ticks (cron, every), each a delay-queue message |
//! | `lease/` | the leader lease (shared: leader tasks, room ticks) |
//! | `connection/` | the Redis connection layer: single server, Cluster, Sentinel, replicas |
//! | `producer.rs` | the [`Producer`] handle; each system adds its calls in its folder |
//! | `catalog.rs`, `layout.rs` | the registry of names; the layout version of a namespace |
//! | `history.rs` | shared: histories by the minute and the hour (each system writes its own) |
//! | `env.rs`, `error.rs`, `redact.rs`, `names.rs`, `id.rs`, `time.rs`, `trace.rs`, `script.rs` | shared basics |
//! | `scripts/<system>/*.lua` | the scripts, one per state change, header first |
//! | `workflow/` | flows: DAGs of steps over topics, each step a delay-queue message |
//! | `config/` | on top: every component's options for `delayq.toml` and `DELAYQ_…` variables |
#![deny(missing_docs)]
// Every public fn that returns a Result says what can fail (`# Errors`).
#![deny(clippy::missing_errors_doc)]

mod catalog;
pub mod config;
mod connection;
mod delay;
mod env;
mod error;
mod history;
mod id;
mod layout;
mod lease;
mod names;
mod producer;
mod redact;
mod resolve;
mod room;
mod schedule;
mod script;
mod stream;
mod time;
mod trace;
mod workflow;

pub use connection::MIN_REDIS_VERSION;
pub use delay::{
    Cancelled, DeadLetter, FoundMessage, Outcome, Outcomes, PendingMessage, Place, Priority,
    SendOptions, SendOutcome, TopicCounts, TopicStats, Unfinished, DEFAULT_REPLICA_TIMEOUT,
    MAX_KEY_LEN,
};
pub use env::{UrlOrigin, DEFAULT_NAMESPACE, DEFAULT_REDIS_URL};
pub use error::{AckError, Error, Result};
pub use history::{History, HistoryPoint, HISTORY_HOURS, HISTORY_MINUTES, LATENESS_BINS_MS};
pub use id::MessageId;
pub use layout::LAYOUT_VERSION;
pub use lease::{LeaderLease, Leadership};
pub use names::validate_topic;
pub use producer::{Producer, DEFAULT_MAX_PAYLOAD};
pub use resolve::{resolve_connection, Connection};
pub use room::{RoomConfig, RoomCounts, RoomStatus, TickReport, WaitingRoom};
pub use schedule::{
    CatchUp, Schedule, ScheduleChange, ScheduleInfo, TickOutcome, CATCH_UP_ALL_MAX,
    DEFAULT_MISFIRE_AFTER, MIN_EVERY, STALLED_AFTER,
};
pub use stream::{GroupStats, PublishOptions, StreamDeadLetter, StreamStats};
pub use time::MAX_DUE_MS;
pub use workflow::{
    is_step_id, settle_ended_steps, settle_step, settle_steps, Dependency, Flow, FlowId, FlowInfo,
    FlowState, OnFailure, Settled, StepEnd, StepInfo, StepState, MAX_FLOW_STEPS,
};

/// The consumer side of the protocol, for `delayq-runtime` and delayq's own tests. Not a
/// public API: it changes without notice.
#[doc(hidden)]
pub mod protocol {
    pub use crate::catalog::{registry_key, Registered};
    pub use crate::connection::{AnyConn, Deployment, RedisConn, SentinelSpec};
    #[cfg(feature = "testing")]
    pub use crate::delay::{idle_state, travel};
    pub use crate::delay::{
        ClaimBatch, Delivery, Envelope, Flow, NackOutcome, Receipt, RequeueReport, TopicKeys,
        TopicQueue, DEAD_DROP_PER_CALL, MAX_CLAIM_BATCH, WAKE_BACK, WAKE_BOSS, WAKE_CLAIMED,
        WAKE_TRAVEL,
    };
    pub use crate::env::CA_FILE_VAR;
    pub use crate::history::Tally;
    pub use crate::names::validate_namespace;
    pub use crate::redact::redact_url;
    pub use crate::schedule::{
        record_schedule_histories, record_schedule_history, tick_id, tick_time, IndexChanges,
        Produced, RecordRead, ScheduleState, CHANGED as SCHEDULES_CHANGED, RECORDS_PER_CALL,
        WAKE_SCHEDULES,
    };
    pub use crate::stream::{
        dead_stream, StreamEntry, StreamGroup, StreamKeys, TakeOver, TakeOverReport, PAYLOAD_FIELD,
        REPLAY_FOR_FIELD,
    };
    pub use crate::time::{millis, ms_to_time, time_to_ms};
    #[cfg(feature = "otel")]
    pub use crate::trace::parent_context;

    use crate::{Producer, Result};

    /// The SHA1 Redis knows the delay queue's script `name` by (`claim_due`, `ack`, ...: the
    /// files of `scripts/delay/` but the prelude's; the test kit's `travel` and `idle` only with
    /// the feature `testing`), as this build loads it; for tools that read a script's calls in
    /// `INFO commandstats` or the slow log. `None` for another name.
    pub fn delay_script_hash(name: &str) -> Option<&'static str> {
        crate::delay::script_hash(name)
    }

    /// The consumer protocol of `topic` over `producer`'s connection.
    pub fn queue(producer: &Producer, topic: &str) -> Result<TopicQueue> {
        producer.queue(topic)
    }

    /// A producer over an open connection, under `namespace`.
    pub fn producer(conn: RedisConn, namespace: &str) -> Producer {
        Producer::over(conn, namespace)
    }
}
