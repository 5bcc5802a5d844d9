//! The calendar's ticks around clock changes, its grid, and its refusals.
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
