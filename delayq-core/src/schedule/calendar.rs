//! When a schedule's ticks fall: cron patterns (croner) in an IANA time zone (jiff, with its
//! own copy of the tz database), or a fixed interval. Daylight saving: a local time that does
//! not exist runs once, at the first instant after the gap; a local time that occurs twice
//! runs once, at its first occurrence.

use std::time::Duration;

use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

use crate::error::{Error, Result};
use crate::time::MAX_DUE_MS;

/// The fields of a cron pattern, by position, for errors (5 fields, or 6 with seconds first).
const FIELDS_5: [&str; 5] = ["minute", "hour", "day of month", "month", "day of week"];
const FIELDS_6: [&str; 6] = [
    "second",
    "minute",
    "hour",
    "day of month",
    "month",
    "day of week",
];

/// The shortest interval of an `every` schedule.
pub const MIN_EVERY: Duration = Duration::from_millis(10);

fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Error {
    Error::InvalidSchedule {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Parses a cron pattern: 5 fields, or 6 with seconds first; `MON`–`SUN`, `JAN`–`DEC`;
/// `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`. An error names the field at fault.
pub(crate) fn parse_cron(pattern: &str) -> Result<Cron> {
    let trimmed = pattern.trim();
    match parser().parse(trimmed) {
        Ok(cron) => Ok(cron),
        Err(e) => {
            let fields: Vec<&str> = trimmed.split_whitespace().collect();
            let names: &[&str] = match fields.len() {
                5 => &FIELDS_5,
                6 => &FIELDS_6,
                n if !trimmed.starts_with('@') => {
                    return Err(invalid(
                        "cron",
                        format!("{pattern:?} has {n} fields: give 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)"),
                    ))
                }
                _ => return Err(invalid("cron", format!("{pattern:?}: {e}"))),
            };
            // The first field that fails alone (the others `*`) is the one at fault.
            for (i, field) in fields.iter().enumerate() {
                let alone: Vec<&str> = (0..fields.len())
                    .map(|j| if j == i { *field } else { "*" })
                    .collect();
                if let Err(e) = parser().parse(&alone.join(" ")) {
                    return Err(invalid(
                        format!("cron {}", names[i]),
                        format!("{field:?} in {pattern:?}: {e}"),
                    ));
                }
            }
            Err(invalid("cron", format!("{pattern:?}: {e}")))
        }
    }
}

/// An IANA time zone by name (`Europe/Berlin`, `UTC`).
pub(crate) fn zone(name: &str) -> Result<TimeZone> {
    TimeZone::get(name).map_err(|e| {
        invalid(
            "tz",
            format!(
                "{name:?} is not an IANA time zone name (like \"Europe/Berlin\" or \"UTC\"): {e}"
            ),
        )
    })
}

/// When the ticks fall.
#[derive(Debug, Clone)]
pub(crate) enum Calendar {
    /// A cron pattern in a time zone.
    Cron(Box<Cron>, TimeZone),
    /// Every `ms`, counted from an anchor (the schedule's first tick).
    Every(u64),
}

impl Calendar {
    /// The first tick strictly after `after_ms` (unix ms); for `Every`, on the grid of
    /// `anchor_ms`. `None` when there is none before the year 10000.
    pub(crate) fn next_after(&self, after_ms: u64, anchor_ms: u64) -> Option<u64> {
        let next = match self {
            Calendar::Every(every) => {
                let every = (*every).max(1);
                if after_ms < anchor_ms {
                    anchor_ms
                } else {
                    anchor_ms + ((after_ms - anchor_ms) / every + 1) * every
                }
            }
            Calendar::Cron(cron, tz) => cron_next(cron, tz, after_ms)?,
        };
        (next <= MAX_DUE_MS).then_some(next)
    }
}

fn zoned(ms: u64, tz: &TimeZone) -> Option<Zoned> {
    Some(
        Timestamp::from_millisecond(i64::try_from(ms).ok()?)
            .ok()?
            .to_zoned(tz.clone()),
    )
}

fn millis(z: &Zoned) -> Option<u64> {
    u64::try_from(z.timestamp().as_millisecond()).ok()
}

/// The next cron instant after `after_ms`, skipping the second pass of a repeated local hour
/// (croner runs wildcard patterns in both passes; a local time runs once, at its first).
fn cron_next(cron: &Cron, tz: &TimeZone, after_ms: u64) -> Option<u64> {
    let mut from = zoned(after_ms, tz)?;
    for _ in 0..4 {
        let next = cron.find_next_occurrence(&from, false).ok()?;
        let first = tz.to_ambiguous_zoned(next.datetime()).earlier().ok()?;
        if first.timestamp() == next.timestamp() {
            return millis(&next);
        }
        from = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> u64 {
        let ts: Timestamp = text.parse().unwrap();
        ts.as_millisecond() as u64
    }

    fn ticks(pattern: &str, tz: &str, from: &str, n: usize) -> Vec<String> {
        let cal = Calendar::Cron(Box::new(parse_cron(pattern).unwrap()), zone(tz).unwrap());
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
