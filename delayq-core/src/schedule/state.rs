//! One schedule as a producer of its ticks sees it ([`ScheduleState`], read from its record),
//! and the plan of a call: which ticks are due, which the catch-up policy skips, and the
//! `next` after them. Pure: the call itself is in produce.rs.

use super::calendar::Calendar;
use super::records::{record_key, Fields};
use super::spec::{CatchUp, CATCH_UP_ALL_MAX};
use crate::delay::TopicKeys;
use crate::error::{Error, Result};

/// How far the caller's clock may be ahead of Redis' (the script refuses more); the window
/// in which the caller checks its classification of missed ticks reaches this far back.
const CLOCK_SLACK_MS: u64 = 1_000;
/// Ticks one call writes at most (beyond that, the next call goes on).
const TICKS_PER_CALL: usize = 1_000;

/// One schedule as a producer of its ticks sees it, read from its record.
#[derive(Debug, Clone)]
pub struct ScheduleState {
    /// The schedule's name.
    pub name: String,
    /// Its topic's keys (the ticks go there).
    pub keys: TopicKeys,
    pub(super) record: String,
    pub(super) calendar: Calendar,
    pub(super) catch_up: CatchUp,
    /// The record's `next` as read: the fence of the next call, with `gen`.
    pub(super) next_raw: String,
    /// The record's `gen` as read (`0` when it has none): every changing upsert raises it.
    pub(super) gen: String,
    /// A tick more than this late (ms, Redis' clock) is missed.
    pub(super) misfire_after: u64,
    /// The next tick not produced yet (unix ms).
    pub next: u64,
    pub(super) anchor: u64,
    /// The last tick written (unix ms).
    pub(super) last: Option<u64>,
    /// Whether a `#[scheduled]` fn owns it.
    pub from_code: bool,
}

/// A schedule's record as read by its producers.
#[derive(Debug, Clone)]
pub enum RecordRead {
    /// There is none (removed, or moved to another topic).
    Gone,
    /// It is usable.
    Ok(Box<ScheduleState>),
    /// It cannot be used (edited by hand, or written by a newer delayq): its producers skip it
    /// and say why, and the others go on.
    Broken {
        /// Whether a `#[scheduled]` fn owns it (its `owner` field says `code`).
        from_code: bool,
        /// What is wrong with it.
        error: String,
    },
}

impl RecordRead {
    pub(super) fn of(name: &str, keys: TopicKeys, fields: &Fields) -> Self {
        match ScheduleState::from_fields(name, keys, fields) {
            Ok(state) => RecordRead::Ok(Box::new(state)),
            Err(error) => RecordRead::Broken {
                from_code: fields.get("owner").is_some_and(|o| o == "code"),
                error: error.to_string(),
            },
        }
    }
}

impl ScheduleState {
    /// The topic its ticks go to.
    pub fn topic(&self) -> &str {
        &self.keys.topic
    }

    pub(super) fn from_fields(name: &str, keys: TopicKeys, fields: &Fields) -> Result<Self> {
        let get = |f: &str| fields.get(f).map(String::as_str).unwrap_or_default();
        let schedule = super::records::schedule_of(fields)?;
        let ms = |f: &str| {
            get(f).parse::<u64>().map_err(|_| {
                Error::unexpected(
                    "a schedule record's time",
                    &format!("{name}: {f}={:?}", get(f)),
                )
            })
        };
        Ok(ScheduleState {
            name: name.to_string(),
            record: record_key(&keys, name),
            keys,
            calendar: schedule.calendar()?,
            catch_up: schedule.catch_up_policy(),
            next_raw: get("next").to_string(),
            gen: fields.get("gen").cloned().unwrap_or_else(|| "0".into()),
            misfire_after: schedule.misfire_after_ms,
            // Suspended (`suspend.lua` wrote the year 9999 there; a hand that only set the
            // flag is obeyed too): never due.
            next: if get("suspended") == "1" {
                crate::time::MAX_DUE_MS
            } else {
                ms("next")?
            },
            anchor: ms("anchor")?,
            last: get("last").parse().ok(),
            from_code: get("owner") == "code",
        })
    }

    /// The ticks up to `last` that one call may have written ahead of their time (those within
    /// a lead and a second before it), oldest first.
    pub(super) fn written_ahead(&self, last: u64, lead_ms: u64) -> Vec<u64> {
        let from = last.saturating_sub(lead_ms + 1_000);
        let mut out = Vec::new();
        let mut t = self
            .calendar
            .next_after(from.saturating_sub(1), self.anchor);
        while let Some(at) = t.filter(|at| *at <= last && out.len() < TICKS_PER_CALL) {
            out.push(at);
            t = self.calendar.next_after(at, self.anchor);
        }
        out
    }

    /// A time at or after the latest tick before `cutoff` (a missed one), such that no tick
    /// falls between it and `cutoff`; 0 when none is missed. Looked for only within the
    /// clock's slack before `cutoff` (the script refuses a caller further ahead).
    pub(super) fn latest_missed(&self, cutoff: u64) -> u64 {
        if self.next >= cutoff {
            return 0;
        }
        let from = self.next.max(cutoff.saturating_sub(CLOCK_SLACK_MS + 1));
        let mut lo = from;
        let mut t = self.calendar.next_after(from, self.anchor);
        while let Some(at) = t.filter(|at| *at < cutoff) {
            lo = at;
            t = self.calendar.next_after(at, self.anchor);
        }
        lo
    }

    /// The ticks from `next` up to `horizon`, with the new `next` after them and how many were
    /// skipped by the catch-up policy (ticks before `missed_before` count as missed). The
    /// missed ticks are counted, and the latest of them found, in closed form: an outage of
    /// any length costs the same few steps.
    pub(super) fn plan(&self, horizon: u64, missed_before: u64) -> (Vec<u64>, u64, u64) {
        let mut ticks = Vec::new();
        let mut skipped = 0;
        let mut t = Some(self.next);
        if self.next < missed_before {
            let missed = self
                .calendar
                .count(self.next, missed_before, self.anchor)
                .max(1);
            let keep = match self.catch_up {
                CatchUp::All => missed.min(CATCH_UP_ALL_MAX as u64),
                CatchUp::Last => 1,
                CatchUp::None => 0,
            };
            // The latest `keep` missed ticks, walked back from the end of the outage.
            let mut at = missed_before;
            while (ticks.len() as u64) < keep {
                match self.calendar.prev_before(at, self.anchor) {
                    Some(p) if p >= self.next => {
                        ticks.push(p);
                        at = p;
                    }
                    // `next` itself is off the calendar (a hand-edited record): it is the one.
                    _ if ticks.is_empty() => {
                        ticks.push(self.next);
                        break;
                    }
                    _ => break,
                }
            }
            ticks.reverse();
            skipped = missed - ticks.len() as u64;
            t = self
                .calendar
                .next_after(missed_before.saturating_sub(1), self.anchor);
        }
        while let Some(at) = t.filter(|at| *at <= horizon && ticks.len() < TICKS_PER_CALL) {
            ticks.push(at);
            t = self.calendar.next_after(at, self.anchor);
        }
        (ticks, t.unwrap_or(u64::MAX), skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(calendar: Calendar, catch_up: CatchUp, next: u64) -> ScheduleState {
        ScheduleState {
            name: "s".into(),
            keys: TopicKeys::new("ns", "s").unwrap(),
            record: "r".into(),
            calendar,
            catch_up,
            next_raw: next.to_string(),
            gen: "0".into(),
            misfire_after: 1_000,
            next,
            anchor: next,
            last: None,
            from_code: true,
        }
    }

    #[test]
    fn on_time_ticks_are_all_produced_up_to_the_horizon() {
        let s = state(Calendar::Every(100), CatchUp::Last, 1_000);
        assert_eq!(s.plan(1_250, 900), (vec![1_000, 1_100, 1_200], 1_300, 0));
    }

    #[test]
    fn missed_ticks_follow_the_policy() {
        // Ticks at 1 s .. 9 s missed (now 10.5 s: before 9.5 s counts as missed), 10 s on time.
        let every = |c| state(Calendar::Every(1_000), c, 1_000).plan(11_500, 9_500);
        assert_eq!(
            every(CatchUp::Last),
            (vec![9_000, 10_000, 11_000], 12_000, 8)
        );
        assert_eq!(every(CatchUp::None), (vec![10_000, 11_000], 12_000, 9));
        let (all, next, skipped) = every(CatchUp::All);
        assert_eq!((all.len(), next, skipped), (11, 12_000, 0));
        let cron = Calendar::cron(
            super::super::calendar::parse_cron("* * * * * *").unwrap(),
            super::super::calendar::zone("UTC").unwrap(),
        );
        let c = |p| state(cron.clone(), p, 1_000).plan(11_500, 9_500);
        assert_eq!(c(CatchUp::Last), every(CatchUp::Last));
        assert_eq!(c(CatchUp::None), every(CatchUp::None));
        assert_eq!(c(CatchUp::All), every(CatchUp::All));
    }

    /// After 200,000 s (and after a year) down, a per-second cron schedule runs the latest
    /// missed tick (`last`) or the latest 100 (`all`), and counts every missed tick exactly.
    #[test]
    fn a_long_outage_runs_the_latest_ticks_and_counts_all_missed() {
        let cron = |p| {
            Calendar::cron(
                super::super::calendar::parse_cron(p).unwrap(),
                super::super::calendar::zone("Europe/Berlin").unwrap(),
            )
        };
        let start = 1_790_000_000_000; // 2026-09-21, a month before the autumn change
        for down_s in [200_000u64, 366 * 86_400] {
            let now = start + down_s * 1_000 + 400;
            let mb = now - 1_000;
            let plan = |c| state(cron("* * * * * *"), c, start).plan(now + 1_000, mb);
            let (ticks, next, skipped) = plan(CatchUp::Last);
            let latest = (mb - 1) / 1_000 * 1_000;
            // Missed: every second in [start, mb), but the repeated hour of October 2026's
            // change (its local times ran in the first pass); the one before mb runs.
            let repeated = if down_s > 200_000 { 3_600 } else { 0 };
            let missed = (latest - start) / 1_000 + 1 - repeated;
            assert_eq!((ticks[0], skipped), (latest, missed - 1), "down {down_s} s");
            assert_eq!(ticks[1..], [latest + 1_000, latest + 2_000]);
            assert_eq!(next, latest + 3_000);
            let (ticks, _, skipped) = plan(CatchUp::All);
            assert_eq!(ticks.len(), CATCH_UP_ALL_MAX + 2);
            assert_eq!(ticks[0], latest - 99_000);
            assert_eq!(ticks[99], latest);
            assert_eq!(skipped, missed - CATCH_UP_ALL_MAX as u64);
            let (ticks, _, skipped) = plan(CatchUp::None);
            assert_eq!((ticks[0], skipped), (latest + 1_000, missed));
        }
        // Hourly in Berlin across the autumn change: 02:00 runs once (its repeat does not).
        // Missed 22:00Z, 23:00Z, 00:00Z (00:00-02:00 CEST); 01:00Z is 02:00 CET, a repeat.
        let s = state(cron("0 * * * *"), CatchUp::Last, 1_792_879_200_000); // 2026-10-24T22:00Z
        let (ticks, _, skipped) = s.plan(1_792_893_600_000, 1_792_893_600_000); // 25th 02:00Z
        assert_eq!(
            (ticks, skipped),
            (vec![1_792_886_400_000, 1_792_893_600_000], 2)
        );
    }

    #[test]
    fn the_latest_missed_tick_bounds_the_clock_check() {
        let s = state(Calendar::Every(100), CatchUp::None, 1_000);
        // Nothing missed: no lower bound.
        assert_eq!(s.latest_missed(1_000), 0);
        assert_eq!(s.latest_missed(1_050), 1_000);
        // Looked for only within the slack before the cutoff.
        assert_eq!(s.latest_missed(5_000), 4_900);
        let sparse = state(Calendar::Every(10_000), CatchUp::None, 10_000);
        assert_eq!(sparse.latest_missed(50_000), 50_000 - CLOCK_SLACK_MS - 1);
        assert_eq!(sparse.latest_missed(50_001), 50_000);
    }

    #[test]
    fn catch_up_all_is_capped() {
        let s = state(Calendar::Every(10), CatchUp::All, 10);
        let (ticks, _, skipped) = s.plan(100_000, 100_000);
        assert_eq!(ticks.len(), CATCH_UP_ALL_MAX + 1);
        assert_eq!(skipped, 9_999 - CATCH_UP_ALL_MAX as u64);
    }
}
