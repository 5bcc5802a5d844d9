//! When a schedule's ticks fall: cron patterns (croner) in an IANA time zone (jiff, with its
//! own copy of the tz database), or a fixed interval. Daylight saving: a local time that does
//! not exist runs once, at the first instant after the gap; a local time that occurs twice
//! runs once, at its first occurrence.

use std::time::Duration;

use croner::Cron;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::Timestamp;

use super::civil::CivilCron;

use crate::error::{Error, Result};
use crate::time::MAX_DUE_MS;

/// The shortest interval of an `every` schedule.
pub const MIN_EVERY: Duration = Duration::from_millis(delayq_spec::defaults::MIN_EVERY_MS);

fn invalid(e: delayq_spec::SpecError) -> Error {
    Error::InvalidSchedule {
        field: e.field,
        reason: e.reason,
    }
}

/// Parses a cron pattern: 5 fields, or 6 with seconds first; `MON`–`SUN`, `JAN`–`DEC`;
/// `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`. An error names the field at fault
/// (`delayq-spec`'s rule, which `#[scheduled]` checks at compile time).
pub(crate) fn parse_cron(pattern: &str) -> Result<Cron> {
    delayq_spec::cron(pattern).map_err(invalid)
}

/// An IANA time zone by name (`Europe/Berlin`, `UTC`).
pub(crate) fn zone(name: &str) -> Result<TimeZone> {
    delayq_spec::time_zone(name).map_err(invalid)
}

/// When the ticks fall.
#[derive(Debug, Clone)]
pub(crate) enum Calendar {
    /// A cron pattern in a time zone.
    Cron(Box<CivilCron>, TimeZone),
    /// Every `ms`, counted from an anchor (the schedule's first tick).
    Every(u64),
}

impl Calendar {
    /// A cron pattern read in a time zone.
    pub(crate) fn cron(cron: Cron, tz: TimeZone) -> Self {
        Calendar::Cron(Box::new(CivilCron::new(cron)), tz)
    }

    /// The first tick strictly after `after_ms` (unix ms); for `Every`, on the grid of
    /// `anchor_ms`. `None` when there is none before the year 10000.
    /// Where a schedule starts at `now` (unix ms): its first tick after now, and the anchor
    /// of its grid (an interval's starts one interval from now); an error naming `what` when
    /// there is no tick before the year 10000.
    pub(crate) fn start_at(&self, now: u64, what: &str) -> crate::error::Result<(u64, u64)> {
        let anchor = match self {
            Calendar::Every(ms) => now.saturating_add(*ms),
            Calendar::Cron(..) => now,
        };
        let first =
            self.next_after(now, anchor)
                .ok_or_else(|| crate::error::Error::InvalidSchedule {
                    field: "cron".into(),
                    reason: format!("{what} has no tick before the year 10000"),
                })?;
        Ok((first, anchor))
    }

    pub(crate) fn next_after(&self, after_ms: u64, anchor_ms: u64) -> Option<u64> {
        let next = match self {
            Calendar::Every(every) => {
                let every = (*every).max(1);
                if after_ms < anchor_ms {
                    anchor_ms
                } else {
                    ((after_ms - anchor_ms) / every + 1)
                        .checked_mul(every)
                        .and_then(|d| d.checked_add(anchor_ms))?
                }
            }
            Calendar::Cron(cron, tz) => {
                let from = civil_after(tz, i64::try_from(after_ms).ok()?);
                let last_day = (MAX_DUE_MS as i64) / DAY_MS + 2;
                u64::try_from(instant(tz, cron.next_at_or_after(from, last_day)?)?).ok()?
            }
        };
        (next <= MAX_DUE_MS).then_some(next)
    }

    /// The last tick strictly before `before_ms`; for `Every`, on the grid of `anchor_ms` and
    /// not before it. `None` when there is none (after 1970).
    pub(crate) fn prev_before(&self, before_ms: u64, anchor_ms: u64) -> Option<u64> {
        match self {
            Calendar::Every(every) => {
                let every = (*every).max(1);
                (before_ms > anchor_ms)
                    .then(|| anchor_ms + (before_ms - 1 - anchor_ms) / every * every)
            }
            Calendar::Cron(cron, tz) => {
                let to = civil_before(tz, i64::try_from(before_ms).ok()?);
                // A day's margin below 1970: a civil time there may still be an instant after.
                let prev = cron.prev_before(to, -1)?;
                u64::try_from(instant(tz, prev)?).ok()
            }
        }
    }

    /// How many ticks fall in `[from_ms, to_ms)`, in closed form (no walk over the ticks):
    /// an outage of years costs a few thousand steps at most.
    pub(crate) fn count(&self, from_ms: u64, to_ms: u64, anchor_ms: u64) -> u64 {
        if to_ms <= from_ms {
            return 0;
        }
        match self {
            Calendar::Every(every) => {
                let every = (*every).max(1);
                let before = |at: u64| {
                    if at <= anchor_ms {
                        0
                    } else {
                        (at - 1 - anchor_ms) / every + 1
                    }
                };
                before(to_ms) - before(from_ms)
            }
            Calendar::Cron(cron, tz) => {
                let (Ok(from), Ok(to)) = (i64::try_from(from_ms), i64::try_from(to_ms)) else {
                    return 0;
                };
                let mut n = cron.count(civil_before(tz, from), civil_before(tz, to));
                // Every civil time in a spring gap, and the one right after it, is one tick:
                // the first instant after the gap.
                let mut probe = Timestamp::from_millisecond(from - 1).ok();
                while let Some(t) = probe.and_then(|p| tz.following(p).next()) {
                    let at = t.timestamp().as_millisecond();
                    if at >= to {
                        break;
                    }
                    let (old, new) = offsets_around(tz, at);
                    if new > old {
                        let gap_start = at.div_euclid(1_000) + old;
                        let in_gap = cron.count(gap_start, gap_start + (new - old) + 1);
                        n -= in_gap.saturating_sub(1);
                    }
                    probe = Some(t.timestamp());
                }
                n
            }
        }
    }
}

const DAY_MS: i64 = 86_400_000;

/// The offset (seconds) in force just before and at the instant `at_ms`.
fn offsets_around(tz: &TimeZone, at_ms: i64) -> (i64, i64) {
    let offset = |ms: i64| {
        Timestamp::from_millisecond(ms)
            .map(|t| i64::from(tz.to_offset(t).seconds()))
            .unwrap_or(0)
    };
    (offset(at_ms - 1), offset(at_ms))
}

/// The civil time (seconds) of the instant `ms`, to the millisecond.
fn civil_ms(tz: &TimeZone, ms: i64) -> i64 {
    ms + offsets_around(tz, ms).1 * 1_000
}

/// The latest transition at or before `ms`, with the offsets before and after it, when it
/// bounds the range of civil times in question: `ms` is the transition itself, or falls in
/// the second pass of a repeated hour.
fn fold_or_transition(tz: &TimeZone, ms: i64) -> Option<(i64, i64)> {
    let t = tz
        .preceding(Timestamp::from_millisecond(ms + 1).ok()?)
        .next()?;
    let at = t.timestamp().as_millisecond();
    let (old, new) = offsets_around(tz, at);
    let second_pass = new < old && ms < at + (old - new) * 1_000;
    (ms == at || second_pass).then_some((at, old))
}

/// The civil second from which on every civil time maps to an instant after `after_ms`. A
/// civil time maps to one instant: its only one; the first of two in a repeated hour; the
/// first instant after a gap when it falls in one; so the mapping never goes back in time.
fn civil_after(tz: &TimeZone, after_ms: i64) -> i64 {
    match fold_or_transition(tz, after_ms) {
        // In the repeated hour's second pass: its civil times mapped to the first.
        Some((at, old)) if offsets_around(tz, at).1 < old => at.div_euclid(1_000) + old,
        _ => civil_ms(tz, after_ms).div_euclid(1_000) + 1,
    }
}

/// The civil second below which every civil time maps to an instant before `before_ms`.
fn civil_before(tz: &TimeZone, before_ms: i64) -> i64 {
    match fold_or_transition(tz, before_ms) {
        // At a transition, or in a repeated hour's second pass: everything before the
        // transition's civil time in the old offset.
        Some((at, old)) => at.div_euclid(1_000) + old,
        None => {
            let c = civil_ms(tz, before_ms);
            c.div_euclid(1_000) + i64::from(c.rem_euclid(1_000) > 0)
        }
    }
}

/// The instant (unix ms) a civil time (seconds) runs at in `tz`.
fn instant(tz: &TimeZone, civil: i64) -> Option<i64> {
    let dt = Timestamp::from_second(civil)
        .ok()?
        .to_zoned(TimeZone::UTC)
        .datetime();
    let at = |offset: jiff::tz::Offset| (civil - i64::from(offset.seconds())) * 1_000;
    Some(match tz.to_ambiguous_timestamp(dt).offset() {
        AmbiguousOffset::Unambiguous { offset } => at(offset),
        AmbiguousOffset::Fold { before, .. } => at(before),
        AmbiguousOffset::Gap { after, .. } => {
            let probe = Timestamp::from_millisecond(at(after)).ok()?;
            tz.following(probe).next()?.timestamp().as_millisecond()
        }
    })
}

#[cfg(test)]
mod tests;
