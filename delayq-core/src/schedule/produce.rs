//! Producing a schedule's ticks: the runtime calls [`Producer::produce_ticks`] a little before
//! each tick is due. Every process that runs the schedule may call it for the same tick; the
//! call is fenced on the record's `next`, so exactly one writes it.

use super::calendar::Calendar;
use super::records::{record_key, tick_id, Fields};
use super::spec::{CatchUp, Schedule, CATCH_UP_ALL_MAX};
use crate::delay::{send_ticks, TickCall, Ticks, TopicKeys};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;

/// A tick more than this late when it is produced counts as missed (the catch-up policy
/// decides whether it runs).
pub const MISSED_AFTER_MS: u64 = 1_000;
/// Ticks one call writes at most (beyond that, the next call goes on).
const TICKS_PER_CALL: usize = 1_000;

/// One schedule as a producer of its ticks sees it, read from its record.
#[derive(Debug, Clone)]
pub struct ScheduleState {
    /// The schedule's name.
    pub name: String,
    /// Its topic's keys (the ticks go there).
    pub keys: TopicKeys,
    record: String,
    calendar: Calendar,
    catch_up: CatchUp,
    /// The record's `next` as read: the fence of the next call.
    next_raw: String,
    /// The next tick not produced yet (unix ms).
    pub next: u64,
    anchor: u64,
    /// The last tick written (unix ms).
    last: Option<u64>,
    /// Whether a `#[scheduled]` fn owns it.
    pub from_code: bool,
}

/// What a call to [`Producer::produce_ticks`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Produced {
    /// The next tick is further ahead than the lead.
    NotYet,
    /// Another process produced these ticks first, or the schedule changed: read it again.
    Stale,
    /// Ticks written (`ticks`: their times), and ticks skipped by the catch-up policy.
    Ticks {
        /// The times (unix ms) of the ticks written, oldest first.
        ticks: Vec<u64>,
        /// Ticks the catch-up policy skipped.
        skipped: u64,
    },
}

impl ScheduleState {
    fn from_fields(name: &str, keys: TopicKeys, fields: &Fields) -> Result<Self> {
        let get = |f: &str| fields.get(f).map(String::as_str).unwrap_or_default();
        let schedule = Schedule::from_stored(get("kind"), get("spec"), get("tz"), get("catch_up"))?;
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
            next: ms("next")?,
            anchor: ms("anchor")?,
            last: get("last").parse().ok(),
            from_code: get("owner") == "code",
        })
    }

    /// The ticks up to `last` that one call may have written ahead of their time (those within
    /// a lead and a second before it), oldest first.
    fn written_ahead(&self, last: u64, lead_ms: u64) -> Vec<u64> {
        let from = last.saturating_sub(lead_ms + MISSED_AFTER_MS);
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

    /// The ticks from `next` up to `horizon`, with the new `next` after them and how many were
    /// skipped by the catch-up policy (ticks before `missed_before` count as missed). The
    /// missed ticks are counted, and the latest of them found, in closed form: an outage of
    /// any length costs the same few steps.
    fn plan(&self, horizon: u64, missed_before: u64) -> (Vec<u64>, u64, u64) {
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

impl Producer {
    /// Schedule `name` as its producer sees it; `None` when it is gone.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn schedule_state(&self, name: &str) -> Result<Option<ScheduleState>> {
        match self.schedule_fields(name).await? {
            None => Ok(None),
            Some((keys, fields)) => ScheduleState::from_fields(name, keys, &fields).map(Some),
        }
    }

    /// The same, for a schedule whose topic the caller read from the index already (one round
    /// trip less).
    #[doc(hidden)]
    pub async fn schedule_state_at(
        &self,
        name: &str,
        topic: &str,
    ) -> Result<Option<ScheduleState>> {
        match self.record_fields(name, topic).await? {
            None => Ok(None),
            Some((keys, fields)) => ScheduleState::from_fields(name, keys, &fields).map(Some),
        }
    }

    /// Writes the ticks of `state` due up to `now_ms + lead_ms` (Redis' clock), applying the
    /// catch-up policy to those more than [`MISSED_AFTER_MS`] late, fenced on the record; on
    /// success `state` moves on to the next tick.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn produce_ticks(
        &self,
        state: &mut ScheduleState,
        now_ms: u64,
        lead_ms: u64,
    ) -> Result<Produced> {
        let horizon = now_ms + lead_ms;
        if state.next > horizon {
            return Ok(Produced::NotYet);
        }
        let missed_before = now_ms.saturating_sub(MISSED_AFTER_MS);
        let (ticks, new_next, skipped) = state.plan(horizon, missed_before);
        let ids: Vec<(MessageId, u64)> = ticks
            .iter()
            .map(|t| (tick_id(&state.name, *t), *t))
            .collect();
        // Fallen behind (no process ran): the ticks written ahead before that, which may still
        // wait unclaimed, are missed too unless the policy runs every missed tick.
        let behind = state.next < missed_before;
        let stale: Vec<MessageId> = match (behind, state.catch_up, state.last) {
            (true, CatchUp::Last | CatchUp::None, Some(last)) => state
                .written_ahead(last, lead_ms)
                .into_iter()
                .map(|t| tick_id(&state.name, t))
                .collect(),
            _ => Vec::new(),
        };
        let call = Ticks {
            record: &state.record,
            expected_next: &state.next_raw,
            new_next,
            missed: skipped,
            max_attempts: 0,
            ticks: &ids,
            stale: &stale,
            stale_before: missed_before,
        };
        match send_ticks(&self.conn, &state.keys, &call).await? {
            TickCall::Stale => Ok(Produced::Stale),
            TickCall::Produced(_) => {
                state.next = new_next;
                state.next_raw = new_next.to_string();
                if let Some(t) = ticks.last() {
                    state.last = Some(*t);
                }
                Ok(Produced::Ticks { ticks, skipped })
            }
        }
    }

    /// Upserts the schedule of a `#[scheduled]` fn: its ticks go to the topic of its own name.
    #[doc(hidden)]
    pub async fn upsert_code_schedule(&self, name: &str, schedule: &Schedule) -> Result<()> {
        self.put_schedule(name, schedule, name, super::store::Owner::Code, None)
            .await
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
            let mb = now - MISSED_AFTER_MS;
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
    fn catch_up_all_is_capped() {
        let s = state(Calendar::Every(10), CatchUp::All, 10);
        let (ticks, _, skipped) = s.plan(100_000, 100_000);
        assert_eq!(ticks.len(), CATCH_UP_ALL_MAX + 1);
        assert_eq!(skipped, 9_999 - CATCH_UP_ALL_MAX as u64);
    }
}
