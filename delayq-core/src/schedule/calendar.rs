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
mod tests {
    use super::*;

    fn utc(text: &str) -> u64 {
        let ts: Timestamp = text.parse().unwrap();
        ts.as_millisecond() as u64
    }

    fn ticks(pattern: &str, tz: &str, from: &str, n: usize) -> Vec<String> {
        let cal = Calendar::cron(parse_cron(pattern).unwrap(), zone(tz).unwrap());
        let mut at = utc(from);
        let mut out = Vec::new();
        for _ in 0..n {
            at = cal.next_after(at, 0).unwrap();
            out.push(Timestamp::from_millisecond(at as i64).unwrap().to_string());
        }
        out
    }

    #[test]
    fn daily_at_nine_in_berlin_follows_both_2026_changes() {
        // 2026: CET -> CEST on 29 March (02:00 -> 03:00), back on 25 October (03:00 -> 02:00).
        assert_eq!(
            ticks("0 9 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z", 4),
            [
                "2026-03-28T08:00:00Z",
                "2026-03-29T07:00:00Z",
                "2026-03-30T07:00:00Z",
                "2026-03-31T07:00:00Z"
            ]
        );
        assert_eq!(
            ticks("0 9 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", 3),
            [
                "2026-10-25T08:00:00Z",
                "2026-10-26T08:00:00Z",
                "2026-10-27T08:00:00Z"
            ]
        );
    }

    #[test]
    fn a_local_time_in_the_spring_gap_runs_once_at_the_first_instant_after_it() {
        // 02:30 does not exist in Berlin on 29 March 2026: it runs at 03:00 CEST (01:00 UTC).
        assert_eq!(
            ticks("30 2 * * *", "Europe/Berlin", "2026-03-28T00:00:00Z", 3),
            [
                "2026-03-28T01:30:00Z",
                "2026-03-29T01:00:00Z",
                "2026-03-30T00:30:00Z"
            ]
        );
        // Every 15 minutes: nothing in the gap, 03:00 once.
        assert_eq!(
            ticks("*/15 * * * *", "Europe/Berlin", "2026-03-29T00:40:00Z", 3),
            [
                "2026-03-29T00:45:00Z",
                "2026-03-29T01:00:00Z",
                "2026-03-29T01:15:00Z"
            ]
        );
    }

    #[test]
    fn a_local_time_that_occurs_twice_runs_once_at_its_first_occurrence() {
        // 02:30 occurs twice in Berlin on 25 October 2026 (CEST 00:30 UTC, CET 01:30 UTC).
        assert_eq!(
            ticks("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", 2),
            ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
        );
        // Hourly: 02:00 CEST runs, 02:00 CET (its second occurrence) does not.
        assert_eq!(
            ticks("0 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z", 3),
            [
                "2026-10-25T00:00:00Z",
                "2026-10-25T02:00:00Z",
                "2026-10-25T03:00:00Z"
            ]
        );
    }

    #[test]
    fn names_seconds_and_nicknames_parse() {
        assert_eq!(
            ticks("0 9 * * MON-FRI", "UTC", "2026-11-27T10:00:00Z", 2),
            ["2026-11-30T09:00:00Z", "2026-12-01T09:00:00Z"]
        );
        assert_eq!(
            ticks("30 0 12 1 JAN *", "UTC", "2026-06-01T00:00:00Z", 1),
            ["2027-01-01T12:00:30Z"]
        );
        assert_eq!(
            ticks("@daily", "UTC", "2026-06-01T00:00:00Z", 1),
            ["2026-06-02T00:00:00Z"]
        );
        assert_eq!(
            ticks("@hourly", "UTC", "2026-06-01T00:10:00Z", 1),
            ["2026-06-01T01:00:00Z"]
        );
    }

    #[test]
    fn a_bad_pattern_or_zone_names_the_field() {
        let err = parse_cron("0 25 * * *").unwrap_err().to_string();
        assert!(err.contains("hour") && err.contains("\"25\""), "{err}");
        let err = parse_cron("0 9 * * FUNDAY").unwrap_err().to_string();
        assert!(err.contains("day of week"), "{err}");
        let err = parse_cron("61 * * * * *").unwrap_err().to_string();
        assert!(err.contains("second"), "{err}");
        let err = parse_cron("* * *").unwrap_err().to_string();
        assert!(err.contains("3 fields"), "{err}");
        let err = parse_cron("0 0 30 2 *").unwrap_err().to_string();
        assert!(
            err.contains("day of month") && err.contains("no date"),
            "{err}"
        );
        let err = zone("Europe/Atlantis").unwrap_err().to_string();
        assert!(
            err.contains("tz") && err.contains("Europe/Atlantis"),
            "{err}"
        );
    }

    #[test]
    fn every_keeps_to_its_grid() {
        let cal = Calendar::Every(1_000);
        assert_eq!(cal.next_after(500, 2_000), Some(2_000));
        assert_eq!(cal.next_after(2_000, 2_000), Some(3_000));
        assert_eq!(cal.next_after(7_999, 2_000), Some(8_000));
    }
}
