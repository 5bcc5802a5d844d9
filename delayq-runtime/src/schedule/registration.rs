//! What `#[scheduled]` registers, and finding every scheduled fn linked in.

use delayq_core::Error;

use crate::delay::ListenerRegistration;
use crate::registry::unique;

/// What `#[scheduled]` registers: its schedule, and the delay listener that runs its ticks
/// (on the topic of the schedule's name).
pub struct ScheduleRegistration {
    /// The schedule's name (and its ticks' topic).
    pub name: &'static str,
    /// The cron pattern, or `None` for an interval.
    pub cron: Option<&'static str>,
    /// The interval (ms) when there is no pattern.
    pub every_ms: u64,
    /// The IANA time zone.
    pub tz: &'static str,
    /// `last`, `none` or `all`.
    pub catch_up: &'static str,
    /// How late (ms) a tick may be produced and still count as on time.
    pub misfire_after_ms: u64,
    /// The options the attribute wrote (the rest are defaults).
    pub given: &'static [&'static str],
    /// The listener that runs the ticks.
    pub listener: ListenerRegistration,
}

inventory::collect!(ScheduleRegistration);

/// Every `#[scheduled]` fn linked into this binary; an error when two share a name.
pub(crate) fn all_schedules() -> Result<Vec<&'static ScheduleRegistration>, Error> {
    unique(
        inventory::iter::<ScheduleRegistration>,
        |r| format!("schedule {:?}", r.name),
        |r| r.listener.function,
    )
}
