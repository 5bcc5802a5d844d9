//! Schedules: recurring work as the delay queue's own citizens. Each tick is one delay-queue
//! message (so it gets retries, dead letters, both ack modes, metrics and the CLI), written
//! once however many processes run the schedule: the ticks are fenced on the schedule's
//! record, which lives in its topic's slot. The next tick's time lives in Redis, so a tick
//! missed while no process ran is caught up by the schedule's policy.
//!
//! Schedules build on the delay queue (`crate::delay`): the one system another imports.
//!
//! - `calendar.rs`: when ticks fall (cron patterns in jiff time zones, or an interval);
//!   `civil.rs`: a cron pattern's matches on the wall clock, counted without a walk.
//! - `spec.rs`: [`Schedule`] and [`CatchUp`], as users build them.
//! - `records.rs`: the records and their keys, and reading them (in pipelines).
//! - `index.rs`: the index with its version and change log.
//! - `store.rs`: `upsert_schedule` and `remove_schedule`.
//! - `info.rs`: what `schedules()` reports of one ([`ScheduleInfo`]); `list.rs`: listing them.
//! - `state.rs`: a schedule as its producers see it, and the plan of which ticks are due.
//! - `produce.rs`: reading that state and writing the ticks that are due (the runtime calls
//!   it).
//! - `scripts/schedule/upsert.lua` and `index.lua`; the ticks themselves:
//!   `scripts/delay/tick.lua`.

mod calendar;
#[cfg(test)]
mod calendar_reference;
mod civil;
mod control;
mod history;
mod index;
mod info;
mod list;
mod produce;
mod records;
mod spec;
mod state;
mod store;

use std::sync::LazyLock;

pub use calendar::MIN_EVERY;
pub use control::ScheduleChange;
pub use history::{record_schedule_histories, record_schedule_history};
pub use index::IndexChanges;
pub use info::{ScheduleInfo, TickOutcome, STALLED_AFTER};
pub use produce::Produced;
pub use records::{tick_id, tick_time, RECORDS_PER_CALL};
pub use spec::{CatchUp, Schedule, CATCH_UP_ALL_MAX, DEFAULT_MISFIRE_AFTER};
pub use state::{RecordRead, ScheduleState};

/// What a schedule's change publishes on its topic's wake-up channel (beside the delay
/// queue's `d` and `i`): the runtimes listening there read the index's changes at once.
pub const WAKE_SCHEDULES: &[u8] = b"s";

/// Notified when this process upserts or removes a schedule, so that its runtimes' readers
/// look again at once (other processes' changes reach them over the topic's wake-up channel,
/// [`WAKE_SCHEDULES`], and the index's version is polled as a safety net).
pub static CHANGED: LazyLock<tokio::sync::Notify> = LazyLock::new(tokio::sync::Notify::new);
