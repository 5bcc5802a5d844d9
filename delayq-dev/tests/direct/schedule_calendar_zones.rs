//! the calendar (through the public `Schedule::next_ticks`) against a brute-force
//! reference in zones the crate's own reference does not cover: a whole skipped day (Apia
//! 2011), a 30-minute change of standard offset (Caracas 2016), DST abolished (Sao Paulo
//! 2019, Moscow 2011/2014), a 2-hour DST (Antarctica/Troll), negative DST (Dublin), DST
//! suspended for Ramadan (Casablanca), fixed offsets, and midnight changes (Havana,
//! Santiago). Rules (API.md): a local time that does not exist runs once at the first instant
//! after the gap; one that occurs twice runs once, at its first occurrence.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::Timestamp;

use delayq_runtime::Schedule;

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

fn civil(tz: &TimeZone, ms: i64) -> jiff::civil::DateTime {
    Timestamp::from_millisecond(ms)
        .unwrap()
        .to_zoned(tz.clone())
        .datetime()
}

/// (minutes, hours) of a 5-field pattern with `*` dates.
fn matches(f: &(Vec<bool>, Vec<bool>), dt: jiff::civil::DateTime) -> bool {
    dt.second() == 0 && f.0[dt.minute() as usize] && f.1[dt.hour() as usize]
}

fn reference(tz: &TimeZone, pattern: &str, from: i64, to: i64) -> Vec<i64> {
    let p: Vec<&str> = pattern.split_whitespace().collect();
    let f = (field(p[0], 60), field(p[1], 24));
    let step = 60_000;
    let mut out = Vec::new();
    let mut u = from;
    while u < to {
        let dt = civil(tz, u);
        let first = match tz.to_ambiguous_timestamp(dt).offset() {
            AmbiguousOffset::Fold { before, .. } => {
                dt.to_zoned(TimeZone::fixed(before))
                    .unwrap()
                    .timestamp()
                    .as_millisecond()
                    == u
            }
            _ => true,
        };
        let mut tick = matches(&f, dt) && first;
        let before = civil(tz, u - step);
        if dt.duration_since(before).as_millis() > i128::from(step) {
            let mut c = before + jiff::SignedDuration::from_millis(step);
            while c < dt {
                tick |= matches(&f, c);
                c += jiff::SignedDuration::from_millis(step);
            }
        }
        if tick {
            out.push(u);
        }
        u += step;
    }
    out
}

fn ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

#[test]
fn unusual_zones_agree_with_the_reference() {
    let zones: [(&str, &str, &str); 12] = [
        (
            "Pacific/Apia",
            "2011-12-28T00:00:00Z",
            "2012-01-02T00:00:00Z",
        ),
        (
            "America/Caracas",
            "2016-04-30T00:00:00Z",
            "2016-05-03T00:00:00Z",
        ),
        (
            "America/Sao_Paulo",
            "2019-02-15T00:00:00Z",
            "2019-02-19T00:00:00Z",
        ),
        (
            "America/Sao_Paulo",
            "2018-11-02T00:00:00Z",
            "2018-11-06T00:00:00Z",
        ),
        (
            "Europe/Moscow",
            "2011-03-25T00:00:00Z",
            "2011-03-29T00:00:00Z",
        ),
        (
            "Europe/Moscow",
            "2014-10-24T00:00:00Z",
            "2014-10-28T00:00:00Z",
        ),
        (
            "Antarctica/Troll",
            "2026-03-27T00:00:00Z",
            "2026-03-31T00:00:00Z",
        ),
        (
            "Europe/Dublin",
            "2026-10-23T00:00:00Z",
            "2026-10-27T00:00:00Z",
        ),
        (
            "Africa/Casablanca",
            "2026-02-13T00:00:00Z",
            "2026-03-25T00:00:00Z",
        ),
        (
            "America/Havana",
            "2026-03-06T00:00:00Z",
            "2026-03-10T00:00:00Z",
        ),
        (
            "America/Havana",
            "2026-10-30T00:00:00Z",
            "2026-11-03T00:00:00Z",
        ),
        ("Etc/GMT-14", "2026-06-01T00:00:00Z", "2026-06-03T00:00:00Z"),
    ];
    let patterns = [
        "*/15 * * * *",
        "30 2 * * *",
        "0 0 * * *",
        "30 0 * * *",
        "0 */2 * * *",
        "59 23 * * *",
        "0 1 * * *",
    ];
    let mut problems = Vec::new();
    for (zone, from, to) in zones {
        let tz = TimeZone::get(zone).unwrap();
        let from = from.parse::<Timestamp>().unwrap().as_millisecond();
        let to = to.parse::<Timestamp>().unwrap().as_millisecond();
        for pattern in patterns {
            let want = reference(&tz, pattern, from, to);
            let s = Schedule::cron(pattern).unwrap().tz(zone).unwrap();
            let start = UNIX_EPOCH + Duration::from_millis((from - 1) as u64);
            let got: Vec<i64> = s
                .next_ticks(start, want.len() + 1)
                .unwrap()
                .into_iter()
                .map(ms)
                .filter(|t| *t < to)
                .collect();
            if got != want {
                let show = |v: &[i64]| {
                    v.iter()
                        .map(|t| Timestamp::from_millisecond(*t).unwrap().to_string())
                        .collect::<Vec<_>>()
                };
                let diff_got: Vec<i64> =
                    got.iter().filter(|t| !want.contains(t)).copied().collect();
                let diff_want: Vec<i64> =
                    want.iter().filter(|t| !got.contains(t)).copied().collect();
                problems.push(format!(
                    "{pattern} in {zone}: extra {:?}, missing {:?}",
                    show(&diff_got),
                    show(&diff_want)
                ));
            }
            // From every minute of the window: the next tick.
            let mut u = from;
            while u < to {
                if let Some(n) = want.iter().find(|w| **w > u) {
                    let got = s
                        .next_ticks(UNIX_EPOCH + Duration::from_millis(u as u64), 1)
                        .unwrap();
                    if ms(got[0]) != *n {
                        problems.push(format!(
                            "{pattern} in {zone}: next after {} is {}, want {}",
                            Timestamp::from_millisecond(u).unwrap(),
                            Timestamp::from_millisecond(ms(got[0])).unwrap(),
                            Timestamp::from_millisecond(*n).unwrap()
                        ));
                        break;
                    }
                }
                u += 60_000 * 7;
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// 29 February: from 2026 the next ticks are 2028, 2032, 2036 (and 2100 is no leap year).
#[test]
fn the_29th_of_february_across_years() {
    let s = Schedule::cron("0 0 29 2 *").unwrap();
    let from = "2026-03-01T00:00:00Z"
        .parse::<Timestamp>()
        .unwrap()
        .as_millisecond();
    let got: Vec<String> = s
        .next_ticks(UNIX_EPOCH + Duration::from_millis(from as u64), 3)
        .unwrap()
        .into_iter()
        .map(|t| Timestamp::from_millisecond(ms(t)).unwrap().to_string())
        .collect();
    assert_eq!(
        got,
        [
            "2028-02-29T00:00:00Z",
            "2032-02-29T00:00:00Z",
            "2036-02-29T00:00:00Z"
        ]
    );
    let from = "2097-03-01T00:00:00Z"
        .parse::<Timestamp>()
        .unwrap()
        .as_millisecond();
    let got = s
        .next_ticks(UNIX_EPOCH + Duration::from_millis(from as u64), 1)
        .unwrap();
    assert_eq!(
        Timestamp::from_millisecond(ms(got[0])).unwrap().to_string(),
        "2104-02-29T00:00:00Z"
    );
}
