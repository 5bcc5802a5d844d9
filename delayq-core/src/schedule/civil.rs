//! A cron pattern over civil (wall-clock) time, with no time zone: which civil seconds match,
//! the next and previous match, and how many fall in a range, all without stepping second by
//! second. Days are matched with croner's own field rules (day of month OR day of week, as
//! Vixie cron; `L`, `W`, `#`); the time of day is three sorted lists (hours, minutes,
//! seconds), so a day's matches are counted by arithmetic. calendar.rs maps these civil times
//! to instants in a time zone.
//!
//! Civil times are seconds since 1970-01-01T00:00:00 on the wall clock; days are days since
//! then.

use croner::{Cron, Weekday};

pub(crate) const DAY: i64 = 86_400;
/// Days a search walks at most: a whole Gregorian cycle (400 years) and a bit, after which
/// every date repeats with the same weekday, so a pattern that matches no day in it never does.
pub(crate) const SCAN_DAYS: i64 = 146_097 + 366;

/// A cron pattern's matching civil times.
#[derive(Debug, Clone)]
pub(crate) struct CivilCron {
    cron: Cron,
    hours: Vec<u32>,
    minutes: Vec<u32>,
    seconds: Vec<u32>,
}

/// (year, month 1-12, day 1-31) of a day number (Howard Hinnant's `civil_from_days`).
pub(crate) fn date_of(day: i64) -> (i64, u32, u32) {
    let z = day + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn matching(upto: u32, field: impl Fn(u32) -> bool) -> Vec<u32> {
    (0..upto).filter(|v| field(*v)).collect()
}

impl CivilCron {
    pub(crate) fn new(cron: Cron) -> Self {
        let p = &cron.pattern;
        let hours = matching(24, |h| p.hour_match(h).unwrap_or(false));
        let minutes = matching(60, |m| p.minute_match(m).unwrap_or(false));
        let seconds = matching(60, |s| p.second_match(s).unwrap_or(false));
        CivilCron {
            cron,
            hours,
            minutes,
            seconds,
        }
    }

    /// Whether any time of `day` matches the date fields.
    pub(crate) fn day_matches(&self, day: i64) -> bool {
        let (y, m, d) = date_of(day);
        let weekday = Weekday::from_days_from_sunday((day + 4).rem_euclid(7) as u32);
        let Ok(year) = i32::try_from(y) else {
            return false;
        };
        let p = &self.cron.pattern;
        p.month_match(m).unwrap_or(false) && p.day_match(year, m, d, weekday).unwrap_or(false)
    }

    fn per_day(&self) -> u64 {
        (self.hours.len() * self.minutes.len() * self.seconds.len()) as u64
    }

    /// The first matching time of day at or after `t` (seconds into the day).
    fn first_at_or_after(&self, t: u32) -> Option<u32> {
        let (h0, m0, s0) = (t / 3_600, t % 3_600 / 60, t % 60);
        let (m_first, s_first) = (*self.minutes.first()?, *self.seconds.first()?);
        for &h in self.hours.iter().filter(|h| **h >= h0) {
            if h > h0 {
                return Some(h * 3_600 + m_first * 60 + s_first);
            }
            for &m in self.minutes.iter().filter(|m| **m >= m0) {
                if m > m0 {
                    return Some(h * 3_600 + m * 60 + s_first);
                }
                if let Some(&s) = self.seconds.iter().find(|s| **s >= s0) {
                    return Some(h * 3_600 + m * 60 + s);
                }
            }
        }
        None
    }

    /// The last matching time of day before `t` (seconds into the day, up to 86,400).
    fn last_before(&self, t: u32) -> Option<u32> {
        let u = t.checked_sub(1)?;
        let (h0, m0, s0) = (u / 3_600, u % 3_600 / 60, u % 60);
        let (m_last, s_last) = (*self.minutes.last()?, *self.seconds.last()?);
        for &h in self.hours.iter().rev().filter(|h| **h <= h0) {
            if h < h0 {
                return Some(h * 3_600 + m_last * 60 + s_last);
            }
            for &m in self.minutes.iter().rev().filter(|m| **m <= m0) {
                if m < m0 {
                    return Some(h * 3_600 + m * 60 + s_last);
                }
                if let Some(&s) = self.seconds.iter().rev().find(|s| **s <= s0) {
                    return Some(h * 3_600 + m * 60 + s);
                }
            }
        }
        None
    }

    /// How many matching times of day fall before `t` (seconds into the day, up to 86,400).
    fn count_before(&self, t: u32) -> u64 {
        if t >= DAY as u32 {
            return self.per_day();
        }
        let (h0, m0, s0) = (t / 3_600, t % 3_600 / 60, t % 60);
        let below = |list: &[u32], v: u32| list.partition_point(|x| *x < v) as u64;
        let (n_m, n_s) = (self.minutes.len() as u64, self.seconds.len() as u64);
        let mut n = below(&self.hours, h0) * n_m * n_s;
        if self.hours.binary_search(&h0).is_ok() {
            n += below(&self.minutes, m0) * n_s;
            if self.minutes.binary_search(&m0).is_ok() {
                n += below(&self.seconds, s0);
            }
        }
        n
    }

    /// The first matching civil time at or after `at`, up to the day `last_day`.
    pub(crate) fn next_at_or_after(&self, at: i64, last_day: i64) -> Option<i64> {
        let (day, t) = (at.div_euclid(DAY), at.rem_euclid(DAY) as u32);
        (day..=last_day.min(day + SCAN_DAYS))
            .filter(|d| self.day_matches(*d))
            .find_map(|d| {
                let from = if d == day { t } else { 0 };
                self.first_at_or_after(from).map(|s| d * DAY + i64::from(s))
            })
    }

    /// The last matching civil time before `at`, down to the day `first_day`.
    pub(crate) fn prev_before(&self, at: i64, first_day: i64) -> Option<i64> {
        let (day, t) = (at.div_euclid(DAY), at.rem_euclid(DAY) as u32);
        (first_day.max(day - SCAN_DAYS)..=day)
            .rev()
            .filter(|d| self.day_matches(*d))
            .find_map(|d| {
                let before = if d == day { t } else { DAY as u32 };
                self.last_before(before).map(|s| d * DAY + i64::from(s))
            })
    }

    /// How many matching civil times fall in `[from, to)`.
    pub(crate) fn count(&self, from: i64, to: i64) -> u64 {
        if to <= from {
            return 0;
        }
        let (d0, t0) = (from.div_euclid(DAY), from.rem_euclid(DAY) as u32);
        let (d1, t1) = (to.div_euclid(DAY), to.rem_euclid(DAY) as u32);
        let on = |d: i64| self.day_matches(d);
        if d0 == d1 {
            return if on(d0) {
                self.count_before(t1) - self.count_before(t0)
            } else {
                0
            };
        }
        let first = if on(d0) {
            self.per_day() - self.count_before(t0)
        } else {
            0
        };
        let middle = (d0 + 1..d1).filter(|d| on(*d)).count() as u64 * self.per_day();
        let last = if on(d1) { self.count_before(t1) } else { 0 };
        first + middle + last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use croner::parser::{CronParser, Seconds};

    fn civil(p: &str) -> CivilCron {
        let parser = CronParser::builder().seconds(Seconds::Optional).build();
        CivilCron::new(parser.parse(p).unwrap())
    }

    /// Every civil second of a few days, matched by croner itself, against the arithmetic.
    #[test]
    fn agrees_with_croner_second_by_second() {
        for p in [
            "*/15 * * * *",
            "30 2,14 * * *",
            "*/7 5 */3 * * *",
            "0 0 29 2 *",
            "0 9 * * MON-FRI",
        ] {
            let c = civil(p);
            let from = 20_512 * DAY - 3 * 3_600; // 2026-02-28 21:00 (civil)
            let mut matches = Vec::new();
            for s in from..from + 2 * DAY + 7_200 {
                let z = jiff::Timestamp::from_second(s)
                    .unwrap()
                    .to_zoned(jiff::tz::TimeZone::UTC);
                if c.cron.is_time_matching(&z).unwrap() {
                    matches.push(s);
                }
            }
            let to = from + 2 * DAY + 7_200;
            assert_eq!(c.count(from, to), matches.len() as u64, "{p}");
            let mut at = from;
            for m in &matches {
                let next = c.next_at_or_after(at, i64::MAX / DAY).unwrap();
                assert_eq!(next, *m, "{p}");
                assert_eq!(c.prev_before(next + 1, 0), Some(next), "{p}");
                at = next + 1;
            }
        }
    }

    /// Date-field extensions and day-of-month OR day-of-week, day by day over three years,
    /// against croner's own search.
    #[test]
    fn extensions_and_or_semantics_agree_with_croner() {
        let parser = CronParser::builder().seconds(Seconds::Optional).build();
        for p in [
            "0 0 L * *",
            "0 0 15W * *",
            "0 0 * * 5#3",
            "0 0 * * 5L",
            "0 0 1,15 * MON",
            "0 0 ? * MON",
            "0 0 29 2 *",
        ] {
            let c = civil(p);
            let cron = parser.parse(p).unwrap();
            let mut z = jiff::Timestamp::from_second(20_454 * DAY)
                .unwrap()
                .to_zoned(jiff::tz::TimeZone::UTC);
            let mut at = 20_454 * DAY + 1;
            for _ in 0..40 {
                z = cron.find_next_occurrence(&z, false).unwrap();
                let next = c.next_at_or_after(at, i64::MAX / DAY).unwrap();
                assert_eq!(next, z.timestamp().as_second(), "{p}");
                at = next + 1;
            }
        }
    }

    #[test]
    fn dates_and_weekdays() {
        assert_eq!(date_of(0), (1970, 1, 1));
        assert_eq!(date_of(20_513), (2026, 3, 1));
        assert_eq!(date_of(-1), (1969, 12, 31));
        // Feb 30 never matches: the search gives up after a whole Gregorian cycle.
        assert_eq!(
            civil("0 0 30 2 *").next_at_or_after(0, i64::MAX / DAY),
            None
        );
    }
}
