//! Schedules (`#[scheduled]`, and dynamic ones from `Producer::upsert_schedule`): each tick
//! is a delay-queue message, so a `#[scheduled]` fn runs as a delay listener on the topic of
//! its schedule's name, and this system only produces the ticks.
//!
//! Schedules build on the delay queue (`crate::delay`): the one system another imports.
//!
//! - `registration.rs`: what the macro registers (the schedule and its listener).
//! - `tick.rs`: [`Tick`], what a `#[scheduled]` fn is called with.
//! - `writer.rs`: [`TickWriter`], the task that writes ticks a little ahead of their time
//!   (with the real `delayq_core::Producer`); `reader.rs`: its reader of the schedule index;
//!   `updates.rs`: how it takes what was read; `backoff.rs`: schedules it leaves alone for a
//!   while; `clock.rs`: Redis' clock as estimated here.
//! - `metrics.rs`: the schedules' metrics (every series from 0; a late write's lag held
//!   for a minute).
//! - `producing.rs`: what this runtime produces ticks for, and which of those fail.

mod backoff;
mod clock;
mod metrics;
mod producing;
mod reader;
mod registration;
mod tick;
mod updates;
mod writer;

pub(crate) use producing::{FailingSchedules, Producing};
pub(crate) use registration::all_schedules;
pub use registration::ScheduleRegistration;
pub use tick::{Tick, ViaTick};
pub(crate) use writer::TickWriter;
