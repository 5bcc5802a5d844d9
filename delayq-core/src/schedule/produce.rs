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
/// Ticks counted one by one when working out what was missed; a longer outage of a cron
/// schedule is counted up to here ("at least").
const COUNT_MAX: u64 = 100_000;

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
    fn of(name: &str, keys: TopicKeys, fields: &Fields) -> Self {
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
    /// skipped by the catch-up policy (ticks before `missed_before` count as missed).
    fn plan(&self, horizon: u64, missed_before: u64) -> (Vec<u64>, u64, u64) {
        let mut missed_count = 0u64;
        let mut last_missed = None;
        let mut kept_missed = std::collections::VecDeque::new();
        let mut t = self.next;
        // Missed ticks: counted, and the ones the policy runs kept.
        if t < missed_before {
            if let Calendar::Every(every) = self.calendar {
                let every = every.max(1);
                let n = (missed_before - 1 - t) / every + 1;
                let keep = match self.catch_up {
                    CatchUp::All => n.min(CATCH_UP_ALL_MAX as u64),
                    CatchUp::Last => 1,
                    CatchUp::None => 0,
                };
                for i in (n - keep)..n {
                    kept_missed.push_back(t + i * every);
                }
                missed_count = n;
                t += n * every;
            } else {
                while t < missed_before && missed_count < COUNT_MAX {
                    missed_count += 1;
                    last_missed = Some(t);
                    if self.catch_up == CatchUp::All {
                        kept_missed.push_back(t);
                        if kept_missed.len() > CATCH_UP_ALL_MAX {
                            kept_missed.pop_front();
                        }
                    }
                    match self.calendar.next_after(t, self.anchor) {
                        Some(n) => t = n,
                        None => return (Vec::new(), u64::MAX, missed_count),
                    }
                }
                if t < missed_before {
                    // Longer than counted: start again from the present.
                    t = self
                        .calendar
                        .next_after(missed_before.saturating_sub(1), self.anchor)
                        .unwrap_or(u64::MAX);
                }
                if self.catch_up == CatchUp::Last {
                    kept_missed.extend(last_missed);
                }
            }
        }
        let skipped = missed_count - kept_missed.len() as u64;
        let mut ticks: Vec<u64> = kept_missed.into_iter().collect();
        while t <= horizon && ticks.len() < TICKS_PER_CALL {
            ticks.push(t);
            match self.calendar.next_after(t, self.anchor) {
                Some(n) => t = n,
                None => {
                    t = u64::MAX;
                    break;
                }
            }
        }
        (ticks, t, skipped)
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

    /// The same as a [`RecordRead`]: `Err` only when Redis fails.
    #[doc(hidden)]
    pub async fn schedule_record(&self, name: &str, topic: &str) -> Result<RecordRead> {
        Ok(match self.record_fields(name, topic).await? {
            None => RecordRead::Gone,
            Some((keys, fields)) => RecordRead::of(name, keys, &fields),
        })
    }

    /// The records of `schedules` ((name, topic) as the index says) as producers see them,
    /// read in pipelines (see [`RECORDS_PER_CALL`](super::RECORDS_PER_CALL)), in the order
    /// asked. A record that cannot be used is [`RecordRead::Broken`], never an error of the
    /// call: one bad record must not keep the others from being read.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    #[doc(hidden)]
    pub async fn schedule_records(
        &self,
        schedules: &[(String, String)],
    ) -> Result<Vec<RecordRead>> {
        Ok(self
            .records_fields(schedules)
            .await?
            .into_iter()
            .zip(schedules)
            .map(|(read, (name, _))| match read {
                Ok(None) => RecordRead::Gone,
                Ok(Some((keys, fields))) => RecordRead::of(name, keys, &fields),
                Err(error) => RecordRead::Broken {
                    from_code: false,
                    error,
                },
            })
            .collect())
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
        let cron = Calendar::Cron(
            Box::new(super::super::calendar::parse_cron("* * * * * *").unwrap()),
            super::super::calendar::zone("UTC").unwrap(),
        );
        let c = |p| state(cron.clone(), p, 1_000).plan(11_500, 9_500);
        assert_eq!(c(CatchUp::Last), every(CatchUp::Last));
        assert_eq!(c(CatchUp::None), every(CatchUp::None));
        assert_eq!(c(CatchUp::All), every(CatchUp::All));
    }

    #[test]
    fn catch_up_all_is_capped() {
        let s = state(Calendar::Every(10), CatchUp::All, 10);
        let (ticks, _, skipped) = s.plan(100_000, 100_000);
        assert_eq!(ticks.len(), CATCH_UP_ALL_MAX + 1);
        assert_eq!(skipped, 9_999 - CATCH_UP_ALL_MAX as u64);
    }
}
