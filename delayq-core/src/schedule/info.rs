//! What `schedules()` reports of a schedule: [`ScheduleInfo`], what became of its last tick,
//! and whether it is stalled.

use std::time::SystemTime;

use serde::Serialize;

use super::records::Fields;
use super::spec::{CatchUp, Schedule};
use crate::delay::TopicKeys;
use crate::time::ms_to_time;

/// What became of a schedule's last tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TickOutcome {
    /// Produced, not yet due or not yet claimed.
    Pending,
    /// A handler runs it now.
    Running,
    /// It failed and waits for its next attempt.
    Retrying,
    /// It went to the dead letters.
    Dead,
    /// Handled (acked), or cancelled.
    Done,
}

impl TickOutcome {
    /// `pending`, `running`, `retrying`, `dead` or `done`.
    pub fn as_str(self) -> &'static str {
        match self {
            TickOutcome::Pending => "pending",
            TickOutcome::Running => "running",
            TickOutcome::Retrying => "retrying",
            TickOutcome::Dead => "dead",
            TickOutcome::Done => "done",
        }
    }
}

/// A schedule as `schedules()` lists it.
#[derive(Debug, Clone)]
pub struct ScheduleInfo {
    /// Its name.
    pub name: String,
    /// The cron pattern, or `every <interval>`.
    pub spec: String,
    /// The time zone of a cron pattern.
    pub tz: String,
    /// What runs of missed ticks.
    pub catch_up: CatchUp,
    /// How late a tick may be produced and still count as on time (see
    /// [`Schedule::misfire_after`]).
    pub misfire_after: std::time::Duration,
    /// The topic its ticks go to (a `#[scheduled]` fn's is its name).
    pub topic: String,
    /// The next tick not produced yet.
    pub next_at: Option<SystemTime>,
    /// The last tick produced.
    pub last_at: Option<SystemTime>,
    /// What became of the last tick.
    pub last_outcome: Option<TickOutcome>,
    /// Whether code owns it (`#[scheduled]`: upserted at every runtime start) rather than
    /// `upsert_schedule`.
    pub from_code: bool,
    /// Whether its next tick is more than [`STALLED_AFTER`] behind Redis' clock: no runtime
    /// produces it (none listens on its topic, or none runs), or its record is broken.
    pub stalled: bool,
    /// Whether it is suspended ([`Producer::suspend_schedule`](crate::Producer::suspend_schedule)):
    /// no tick is produced until it is resumed; `next_at` is then `None`.
    pub suspended: bool,
    /// Why its record cannot be used (edited by hand, or written by a newer delayq), when it
    /// cannot: runtimes skip it (logging this) and produce the others. The other fields then
    /// hold what could be read (empty or default where nothing could).
    pub error: Option<String>,
}

/// A schedule whose next tick is this far behind Redis' clock is stalled
/// ([`ScheduleInfo::stalled`]): a runtime that produces it writes each tick about a second
/// ahead, and one that was down catches up within a second of starting.
pub const STALLED_AFTER: std::time::Duration = std::time::Duration::from_secs(60);
/// A record's time field (unix ms), if it is one.
pub(super) fn field_ms(fields: &Fields, name: &str) -> Option<u64> {
    fields.get(name).and_then(|v| v.parse().ok())
}

/// What `schedules()` reports of one record (`now_ms`: Redis' clock).
pub(super) fn info_of(
    name: &str,
    keys: TopicKeys,
    fields: &Fields,
    last_outcome: Option<TickOutcome>,
    now_ms: u64,
) -> ScheduleInfo {
    let get = |f: &str| fields.get(f).cloned().unwrap_or_default();
    let schedule = Schedule::from_stored(
        &get("kind"),
        &get("spec"),
        &get("tz"),
        &get("catch_up"),
        &get("misfire_after"),
    );
    let next = field_ms(fields, "next");
    // What producers would refuse (see ScheduleState): the spec, and the times they fence on.
    let error = match (&schedule, next, field_ms(fields, "anchor")) {
        (Err(e), ..) => Some(e.to_string()),
        (Ok(_), None, _) => Some(format!(
            "its next tick is not a time: next={:?}",
            get("next")
        )),
        (Ok(_), _, None) => Some(format!(
            "its anchor is not a time: anchor={:?}",
            get("anchor")
        )),
        _ => None,
    };
    let stall_ms = STALLED_AFTER.as_millis() as u64;
    let suspended = get("suspended") == "1";
    // Suspended, it produces nothing on purpose: never stalled (unless its record is broken).
    let stalled = error.is_some()
        || (!suspended && next.is_some_and(|n| n.saturating_add(stall_ms) < now_ms));
    let (spec, tz, catch_up, misfire_after) = match &schedule {
        Ok(s) => (
            s.spec(),
            s.zone().to_string(),
            s.catch_up_policy(),
            s.misfire_threshold(),
        ),
        Err(_) => (
            get("spec"),
            get("tz"),
            get("catch_up").parse().unwrap_or(CatchUp::Last),
            super::spec::DEFAULT_MISFIRE_AFTER,
        ),
    };
    ScheduleInfo {
        name: name.to_string(),
        spec,
        tz,
        catch_up,
        misfire_after,
        topic: keys.topic.to_string(),
        next_at: next.filter(|_| !suspended).map(ms_to_time),
        last_at: field_ms(fields, "last").map(ms_to_time),
        last_outcome,
        from_code: get("owner") == "code",
        stalled,
        suspended,
        error,
    }
}
