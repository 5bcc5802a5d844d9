//! # delayq-runtime
//!
//! Runs `#[delay_listener]` handlers over Redis. One dependency gives you the macro, the
//! producer and the runtime:
//!
//! ```no_run
//! use std::time::Duration;
//! use delayq_runtime::{delay_listener, Ack, Message, Producer};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct OrderTimeout { order_id: u64 }
//!
//! // Auto ack: Ok acks; Err or a panic retries with backoff, then dead-letters.
//! #[delay_listener(topic = "order.timeout")]
//! async fn close_order(msg: OrderTimeout) -> Result<(), String> {
//!     println!("closing order {}", msg.order_id);
//!     Ok(())
//! }
//!
//! // Manual ack: take an `Ack` as the second parameter.
//! #[delay_listener(topic = "order.remind", concurrency = 8, ack_timeout = "30s")]
//! async fn remind(msg: Message<OrderTimeout>, ack: Ack) {
//!     println!("attempt {} of {}", msg.attempt(), msg.id());
//!     ack.ack().await.expect("ack");
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), delayq_runtime::Error> {
//!     let producer = Producer::connect_from_env().await?;
//!     producer.send("order.timeout", &OrderTimeout { order_id: 7 }, Duration::from_secs(30)).await?;
//!     delayq_runtime::start().await
//! }
//! ```
//!
//! Three pools run per topic: the **boss** sleeps until the next due time (woken over pub/sub
//! when an earlier message arrives) and claims as many due messages as there are free worker
//! slots; **workers** run handlers, renewing their lease; the **back** pool re-delivers claims
//! whose ack deadline passed, scheduled by the earliest deadline.
//!
//! Logs go through `tracing` with constant messages and the values as fields: `topic`, `id`,
//! `attempt` (on the `delayq.handle` span), `error` for a failure's text, `reason` for why a
//! message was dead-lettered or not delivered, `count` for how many.
#![deny(missing_docs)]
// Every public fn that returns a Result says what can fail (`# Errors`).
#![deny(clippy::missing_errors_doc)]

// Lets the code #[delay_listener] generates (`::delayq_runtime::...`) compile in this crate's
// own tests too.
extern crate self as delayq_runtime;

// The tree: one folder per system, each importing only the shared parts, never another
// system; the top layer (`runtime/`) imports them all.
// `cargo test -p delayq-dev --test direct code_layout` checks it.
//   delay/     delay listeners: topic, boss, back, claim, wake-ups
//   stream/    stream listeners: reader, take-over, claim
//   leader/    leader tasks
//   room/      waiting rooms the runtime ticks
//   schedule/  #[scheduled] fns and the tick writer (builds on delay/: the one system
//              another imports)
//   runtime/   builder, spawn, handle and shutdown, start(), gauges (the top layer)
//   testing/   the test kit for users (feature `testing`; on top, like runtime/)
// Shared by the systems: handler (the shapes a listener may have), worker (running one
// delivery), ack, settle, books, ack_batcher (each system's `claim.rs` says how a batch is
// acked), under_lease (a body run under a leader lease), health, options, meter, registry.
mod ack;
mod ack_batcher;
mod books;
mod delay;
mod handler;
mod health;
mod leader;
mod meter;
mod mode;
mod options;
mod registry;
mod room;
mod runtime;
mod schedule;
mod settle;
mod stream;
#[cfg(feature = "testing")]
pub mod testing;
mod under_lease;
mod worker;

/// The guide: how to configure, deploy, test and operate delayq, chapter by chapter. Every
/// example in it is compiled as a doc test.
///
/// - [`configuration`](guide::configuration): dependencies, logs, `delayq.toml`, environment
///   variables, precedence, and one service binary.
/// - [`deployments`](guide::deployments): single server, Redis Cluster, Sentinel, failover,
///   TLS and a least-privilege ACL user.
/// - [`streams_and_leaders`](guide::streams_and_leaders): Redis Streams consumer groups and
///   leader tasks.
/// - [`schedules`](guide::schedules): recurring work, once per tick however many processes.
/// - [`testing`](guide::testing): the test kit (feature `testing`) with time travel.
/// - [`waiting_room`](guide::waiting_room): an admission queue for traffic peaks.
/// - [`flow_control`](guide::flow_control): rate limits, `retry_after`, debounce, bounded
///   dead letters.
/// - [`results`](guide::results): a handler's value kept, `wait` and `send_and_wait`.
/// - [`workflows`](guide::workflows): flows of steps across topics, failure policy, retry.
/// - [`operating`](guide::operating): the `delayq` CLI, dead letters, health, metrics, traces
///   and the dashboard.
/// - [`guarantees`](guide::guarantees): what holds under which Redis settings, and the test
///   that proves each line.
///
/// The chapters are the markdown files in `delayq-runtime/guide/`; how delayq works inside is
/// `ARCHITECTURE.md` at the repository's root.
pub mod guide {
    pub mod configuration {
        #![doc = include_str!("../guide/configuration.md")]
    }
    pub mod deployments {
        #![doc = include_str!("../guide/deployments.md")]
    }
    pub mod streams_and_leaders {
        #![doc = include_str!("../guide/streams-and-leaders.md")]
    }
    pub mod schedules {
        #![doc = include_str!("../guide/schedules.md")]
    }
    pub mod testing {
        #![cfg_attr(feature = "testing", doc = include_str!("../guide/testing.md"))]
        #![cfg_attr(
            not(feature = "testing"),
            doc = "Testing your listeners: this chapter's examples need the feature `testing`; \
                   build the docs with it (docs.rs does)."
        )]
    }
    pub mod waiting_room {
        #![doc = include_str!("../guide/waiting-room.md")]
    }
    pub mod flow_control {
        #![doc = include_str!("../guide/flow-control.md")]
    }
    pub mod results {
        #![doc = include_str!("../guide/results.md")]
    }
    pub mod workflows {
        #![doc = include_str!("../guide/workflows.md")]
    }
    pub mod operating {
        #![doc = include_str!("../guide/operating.md")]
    }
    pub mod guarantees {
        #![doc = include_str!("../guide/guarantees.md")]
    }
}

pub use ack::Ack;
pub use delay::{Dependencies, DependencyError, Message, TopicDelivery};
/// External configuration: where a value came from, what the builder's `set` takes, and the
/// kinds of component (see [`RuntimeHandle::config`]).
pub use delayq_core::config::{ConfigSource, ConfigValue, Kind};
pub use delayq_core::{
    AckError, Cancelled, CatchUp, DeadLetter, Error, Flow, FlowId, FlowInfo, FlowState,
    FoundMessage, GroupStats, History, HistoryPoint, LeaderLease, Leadership, MessageId, OnFailure,
    Outcome, Outcomes, PendingMessage, Place, Priority, Producer, PublishOptions, RoomConfig,
    RoomCounts, RoomStatus, Schedule, ScheduleChange, ScheduleInfo, SendOptions, SendOutcome,
    StepInfo, StepState, StreamDeadLetter, StreamStats, TickOutcome, TickReport, TopicCounts,
    TopicStats, Unfinished, UrlOrigin, WaitingRoom, CATCH_UP_ALL_MAX, DEFAULT_MISFIRE_AFTER,
    LAYOUT_VERSION,
};
pub use delayq_macros::{delay_listener, leader_task, scheduled, stream_listener};
/// The ack modes behind [`Handler`]; the compiler picks one from a listener's shape.
#[doc(hidden)]
pub use handler::{AckMode, AfterRun, Auto, Failure, Manual, RetryAfter, RunFuture};
pub use handler::{Decode, Handler, Inbound, ListenerReturn};
pub use runtime::{
    start, ComponentConfig, EffectiveConfig, FailingSchedule, Health, ListenerHealth,
    ListenerState, RedisHealth, Runtime, RuntimeBuilder, RuntimeHandle, Setting,
};
pub use schedule::Tick;
pub use stream::{StreamDelivery, StreamMessage};

/// Used by the code `#[delay_listener]` generates; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::delay::{erase, ListenerRegistration};
    pub use crate::leader::{erase_leader, LeaderTaskRegistration};
    pub use crate::options::{Backoff, Flow, ListenerOptions, Rate};
    pub use crate::schedule::{ScheduleRegistration, ViaTick};
    pub use crate::stream::{erase_stream, StreamListenerRegistration};
    pub use inventory;

    /// What `start()` would run in this binary, as linked: the delay listeners' topics, and how
    /// many stream listeners, leader tasks and schedules (for the test binaries that share one
    /// process image and must register nothing).
    pub fn linked_registrations() -> (Vec<&'static str>, usize) {
        let topics = inventory::iter::<ListenerRegistration>
            .into_iter()
            .map(|r| r.topic)
            .collect();
        let others = inventory::iter::<StreamListenerRegistration>
            .into_iter()
            .count()
            + inventory::iter::<LeaderTaskRegistration>
                .into_iter()
                .count()
            + inventory::iter::<ScheduleRegistration>.into_iter().count();
        (topics, others)
    }

    /// Checks, on the parameter's span, that a listener's second parameter is `Ack`.
    #[diagnostic::on_unimplemented(
        message = "the second parameter of a listener must be `delayq_runtime::Ack`, not `{Self}`",
        label = "expected `Ack` here",
        note = "a second parameter makes the listener manual-ack; leave it out for auto ack"
    )]
    pub trait IsAck {}
    impl IsAck for crate::Ack {}

    /// Only well-formed when `T` is `Ack`.
    pub struct AssertAck<T: IsAck>(T);

    /// Checks, on the parameter's span, that a delay listener's second parameter is `Ack` or
    /// `Dependencies`.
    #[diagnostic::on_unimplemented(
        message = "the second parameter of a #[delay_listener] must be `delayq_runtime::Ack` or `delayq_runtime::Dependencies`, not `{Self}`",
        label = "expected `Ack` or `Dependencies` here",
        note = "`Ack` makes the listener manual-ack; `Dependencies` reads what the flow steps it waited for returned; leave it out for auto ack"
    )]
    pub trait IsDelaySecond {}
    impl IsDelaySecond for crate::Ack {}
    impl IsDelaySecond for crate::Dependencies {}

    /// Only well-formed when `T` is `Ack` or `Dependencies`.
    pub struct AssertDelaySecond<T: IsDelaySecond>(T);

    /// Checks, on the parameter's span, that a leader task's parameter is `Leadership`.
    #[diagnostic::on_unimplemented(
        message = "the parameter of a #[leader_task] must be `delayq_runtime::Leadership`, not `{Self}`",
        label = "expected `Leadership` here"
    )]
    pub trait IsLeadership {}
    impl IsLeadership for crate::Leadership {}

    /// Only well-formed when `T` is `Leadership`.
    pub struct AssertLeadership<T: IsLeadership>(T);

    /// Checks, on the parameter's span, that a scheduled fn's first parameter is `Tick`.
    #[diagnostic::on_unimplemented(
        message = "the first parameter of a #[scheduled] fn must be `delayq_runtime::Tick`, not `{Self}`",
        label = "expected `Tick` here"
    )]
    pub trait IsTick {}
    impl IsTick for crate::Tick {}

    /// Only well-formed when `T` is `Tick`.
    pub struct AssertTick<T: IsTick>(T);

    /// Only well-formed when `T` is a return type a listener may have.
    pub struct AssertReturn<T: crate::ListenerReturn>(T);
}
