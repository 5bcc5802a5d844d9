//! Schedules (`#[scheduled]`, and dynamic ones from `Producer::upsert_schedule`): each tick
//! is a delay-queue message, so a `#[scheduled]` fn runs as a delay listener on the topic of
//! its schedule's name, and this system only produces the ticks.
//!
//! Schedules build on the delay queue (`crate::delay`): the one system another imports.
//!
//! - `registration.rs`: what the macro registers (the schedule and its listener).
//! - `tick.rs`: [`Tick`], what a `#[scheduled]` fn is called with.
//! - `produce.rs`: the task that writes ticks a little ahead of their time.

mod produce;
mod registration;
mod tick;

pub(crate) use produce::{FailingSchedules, Producer as TickWriter, Producing};
pub(crate) use registration::all_schedules;
pub use registration::ScheduleRegistration;
pub use tick::{Tick, ViaTick};
