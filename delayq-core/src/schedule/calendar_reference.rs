//! The calendar against a brute-force reference, around every clock change of 2026–2030 in
//! zones with unusual ones (a 30-minute shift, a change at 02:45, changes at midnight): walk
//! every minute (or second) in UTC, read it on the local wall clock, match the fields with a
//! parser of its own, and apply API.md's two rules — a local time that does not exist runs
//! once at the first instant after the gap; one that occurs twice runs at its first
//! occurrence. `next_after`, `prev_before` and `count` must agree with it instant for instant.

use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::Timestamp;

use super::calendar::{parse_cron, zone, Calendar};

const ZONES: [&str; 5] = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "America/Santiago",
];
const PATTERNS: [&str; 8] = [
    "*/15 * * * *",
    "* * * * *",
    "15,45 */10 * * * *",
    "30 2 * * *",
    "30 1 * * *",
    "30 2,14 * * *",
    "0 */2 * * *",
    "0,30 2 * * *",
];

/// The reference's own reading of a time field: `*`, `*/n`, `a`, `a,b`.
fn field(text: &str, max: u32) -> Vec<bool> {
    let mut on = vec![false; max as usize];
    for part in text.split(',') {
        if part == "*" {
            on.iter_mut().for_each(|v| *v = true);
        } else if let Some(step) = part.strip_prefix("*/") {
            let step: usize = step.parse().unwrap();
            on.iter_mut().step_by(step).for_each(|v| *v = true);
        } else {
            on[part.parse::<usize>().unwrap()] = true;
        }
    }
    on
}

/// (seconds, minutes, hours) a pattern of only time fields allows.
fn fields(pattern: &str) -> [Vec<bool>; 3] {
    let f: Vec<&str> = pattern.split_whitespace().collect();
    let (s, rest) = if f.len() == 6 {
        (f[0], &f[1..])
    } else {
        ("0", &f[..])
    };
    assert!(rest[2..].iter().all(|x| *x == "*"), "time fields only");
    [field(s, 60), field(rest[0], 60), field(rest[1], 24)]
}

fn civil(tz: &TimeZone, ms: i64) -> jiff::civil::DateTime {
    Timestamp::from_millisecond(ms)
        .unwrap()
        .to_zoned(tz.clone())
        .datetime()
}

fn matches(f: &[Vec<bool>; 3], dt: jiff::civil::DateTime) -> bool {
    f[0][dt.second() as usize] && f[1][dt.minute() as usize] && f[2][dt.hour() as usize]
}

/// The ticks in `[from, to)` by brute force, stepping `step` ms (a minute or a second).
fn reference(tz: &TimeZone, f: &[Vec<bool>; 3], from: i64, to: i64, step: i64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut u = from;
    while u < to {
        let dt = civil(tz, u);
        let first = match tz.to_ambiguous_timestamp(dt).offset() {
            AmbiguousOffset::Fold { before, .. } => {
                (dt.to_zoned(TimeZone::fixed(before)).unwrap().timestamp()).as_millisecond() == u
            }
            _ => true,
        };
        let mut tick = matches(f, dt) && first;
        // A transition forward at `u`: any wall-clock time in the gap runs here.
        let before = civil(tz, u - step);
        if dt.duration_since(before).as_millis() > i128::from(step) {
            // Walk the wall clock from just after `before` up to `dt`.
            let mut c = before + jiff::SignedDuration::from_millis(step);
            while c < dt {
                tick |= matches(f, c);
                c += jiff::SignedDuration::from_millis(step);
            }
        }
        if tick {
            out.push(u as u64);
        }
        u += step;
    }
    out
}

fn transitions(tz: &TimeZone) -> Vec<i64> {
    let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let end: Timestamp = "2031-01-01T00:00:00Z".parse().unwrap();
    tz.following(start)
        .map(|t| t.timestamp())
        .take_while(|t| *t < end)
        .map(|t| t.as_millisecond())
        .collect()
}

fn check(tz_name: &str, pattern: &str) -> usize {
    let tz = zone(tz_name).unwrap();
    let f = fields(pattern);
    let cal = Calendar::cron(parse_cron(pattern).unwrap(), tz.clone());
    let seconds = pattern.split_whitespace().count() == 6;
    let (step, half, dense) = if seconds {
        (1_000, 2 * 3_600_000, 600_000)
    } else {
        (60_000, 26 * 3_600_000, 3 * 3_600_000)
    };
    let mut checked = 0;
    let all = transitions(&tz);
    assert!(all.len() >= 8, "{tz_name}: {} transitions", all.len());
    for t in all {
        let (from, to) = (t - half, t + half);
        let want = reference(&tz, &f, from, to, step);
        let ctx = |what: &str| {
            format!(
                "{pattern} in {tz_name} around {}: {what}",
                civil(&TimeZone::UTC, t)
            )
        };
        // The sequence, tick by tick.
        let mut got = Vec::new();
        let mut at = cal.next_after(from as u64 - 1, 0);
        while let Some(a) = at.filter(|a| *a < to as u64) {
            got.push(a);
            at = cal.next_after(a, 0);
        }
        assert_eq!(got, want, "{}", ctx("ticks"));
        assert_eq!(
            cal.count(from as u64, to as u64, 0),
            want.len() as u64,
            "{}",
            ctx("count")
        );
        // From every step near the change (and half a step off it), next and previous.
        let mut u = t - dense;
        while u < t + dense {
            for x in [u as u64, (u + step / 2) as u64] {
                let next = want.iter().find(|w| **w > x).copied();
                let prev = want.iter().rev().find(|w| **w < x).copied();
                if next.is_some() {
                    assert_eq!(
                        cal.next_after(x, 0),
                        next,
                        "{}",
                        ctx(&format!("next after {x}"))
                    );
                }
                if prev.is_some() {
                    assert_eq!(
                        cal.prev_before(x, 0),
                        prev,
                        "{}",
                        ctx(&format!("prev before {x}"))
                    );
                    let n = want
                        .iter()
                        .filter(|w| **w >= from as u64 && **w < x)
                        .count();
                    assert_eq!(
                        cal.count(from as u64, x, 0),
                        n as u64,
                        "{}",
                        ctx(&format!("count to {x}"))
                    );
                }
                checked += 1;
            }
            u += step;
        }
    }
    checked
}

macro_rules! zone_test {
    ($name:ident, $zone:expr) => {
        #[test]
        fn $name() {
            let checked: usize = PATTERNS.iter().map(|p| check($zone, p)).sum();
            assert!(checked > 10_000, "{checked}");
        }
    };
}

zone_test!(europe_berlin, ZONES[0]);
zone_test!(america_new_york, ZONES[1]);
zone_test!(australia_lord_howe, ZONES[2]);
zone_test!(pacific_chatham, ZONES[3]);
zone_test!(america_santiago, ZONES[4]);

/// The two cases the review reproduced, with the instants spelled out.
#[test]
fn frequent_patterns_go_on_through_the_autumn_change() {
    let ticks = |p: &str, tz: &str, from: &str, n: usize| {
        let cal = Calendar::cron(parse_cron(p).unwrap(), zone(tz).unwrap());
        let mut at = from.parse::<Timestamp>().unwrap().as_millisecond() as u64;
        (0..n)
            .map(|_| {
                at = cal.next_after(at, 0).unwrap();
                Timestamp::from_millisecond(at as i64).unwrap().to_string()
            })
            .collect::<Vec<_>>()
    };
    // Berlin, 25 October 2026: 02:00-03:00 CEST (00:00-01:00Z) runs; its repeat (CET) does not.
    assert_eq!(
        ticks("*/15 * * * *", "Europe/Berlin", "2026-10-25T00:40:00Z", 6),
        [
            "2026-10-25T00:45:00Z",
            "2026-10-25T02:00:00Z",
            "2026-10-25T02:15:00Z",
            "2026-10-25T02:30:00Z",
            "2026-10-25T02:45:00Z",
            "2026-10-25T03:00:00Z"
        ]
    );
    assert_eq!(
        ticks("* * * * *", "America/New_York", "2026-11-01T05:58:00Z", 3),
        [
            "2026-11-01T05:59:00Z",
            "2026-11-01T07:00:00Z",
            "2026-11-01T07:01:00Z"
        ]
    );
    // Berlin, 29 March 2026: 02:30 does not exist; it runs at 03:00 CEST (01:00Z), then 14:30.
    assert_eq!(
        ticks("30 2,14 * * *", "Europe/Berlin", "2026-03-28T14:00:00Z", 3),
        [
            "2026-03-29T01:00:00Z",
            "2026-03-29T12:30:00Z",
            "2026-03-30T00:30:00Z"
        ]
    );
}
