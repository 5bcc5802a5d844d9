//! Producing a schedule's ticks: the runtime calls [`Producer::produce_ticks`] a little before
//! each tick is due. Every process that runs the schedule may call it for the same tick; the
//! call is fenced on the record's `next` and `gen`, so exactly one writes it, and the others
//! learn the record's new `next` from the fence's reply. Whether a tick is late (missed) is
//! decided by Redis' clock, in the script: a caller whose clock is off plans again at Redis'.

use super::records::tick_id;
use super::spec::{CatchUp, Schedule};
use super::state::{RecordRead, ScheduleState};
use crate::delay::{send_ticks, TickCall, Ticks};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;

/// Calls a `produce_ticks` makes at most when Redis answers that the caller's clock is off.
const CLOCK_TRIES: usize = 3;

/// What a call to [`Producer::produce_ticks`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Produced {
    /// The next tick is further ahead than the lead.
    NotYet,
    /// Another process produced these ticks first: nothing to do, the state is refreshed
    /// from the fence's reply (its next tick).
    Stale,
    /// The record changed otherwise (its spec, or by hand): read it again (it may be broken).
    Changed,
    /// The schedule is gone.
    Gone,
    /// Ticks written (`ticks`: their times), and ticks skipped by the catch-up policy.
    Ticks {
        /// The times (unix ms) of the ticks written, oldest first.
        ticks: Vec<u64>,
        /// Ticks the catch-up policy skipped.
        skipped: u64,
    },
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

    /// Writes the ticks of `state` due up to `now_ms + lead_ms` (`now_ms`: the caller's
    /// estimate of Redis' clock), applying the catch-up policy to those more than the
    /// schedule's `misfire_after` late by Redis' clock (when the caller's clock is off, Redis
    /// says so and the call plans again at Redis' time), fenced on the record; on success
    /// `state` moves on to the next tick. When another process was first, or the schedule
    /// changed, `state` is refreshed from the record ([`Produced::Stale`]).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn produce_ticks(
        &self,
        state: &mut ScheduleState,
        now_ms: u64,
        lead_ms: u64,
    ) -> Result<Produced> {
        let mut now = now_ms;
        for _ in 0..CLOCK_TRIES {
            if state.next > now + lead_ms {
                return Ok(Produced::NotYet);
            }
            match self.produce_at(state, now, lead_ms).await? {
                Ok(produced) => return Ok(produced),
                Err(redis_now) => now = redis_now,
            }
        }
        Err(Error::unexpected(
            "tick",
            &format!(
                "{}: Redis' clock still disagrees after {CLOCK_TRIES} calls",
                state.name
            ),
        ))
    }

    /// One call of `tick.lua` at `now`: `Err(Redis' now)` when the script found the caller's
    /// clock off (nothing written).
    async fn produce_at(
        &self,
        state: &mut ScheduleState,
        now: u64,
        lead_ms: u64,
    ) -> Result<std::result::Result<Produced, u64>> {
        let cutoff = now.saturating_sub(state.misfire_after);
        let (ticks, new_next, skipped) = state.plan(now + lead_ms, cutoff);
        // The classification holds for any cutoff in (lo, hi]: the script checks Redis' own.
        let hi = ticks
            .iter()
            .copied()
            .find(|t| *t >= cutoff)
            .unwrap_or(new_next);
        let lo = state.latest_missed(cutoff);
        let ids: Vec<(MessageId, u64)> = ticks
            .iter()
            .map(|t| (tick_id(&state.name, *t), *t))
            .collect();
        // Fallen behind (no process ran): the ticks written ahead before that, which may still
        // wait unclaimed, are missed too unless the policy runs every missed tick.
        let behind = state.next < cutoff;
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
            expected_gen: &state.gen,
            new_next,
            missed: skipped,
            max_attempts: 0,
            ticks: &ids,
            now_ms: now,
            misfire_after_ms: state.misfire_after,
            lo,
            hi,
            stale: &stale,
        };
        Ok(Ok(
            match send_ticks(&self.conn, &state.keys, &call).await? {
                TickCall::Clock(redis_now) => return Ok(Err(redis_now)),
                TickCall::Stale { next: None, .. } => Produced::Gone,
                TickCall::Stale {
                    next: Some(next),
                    gen,
                    last,
                } => {
                    // Another process produced: its `next` (later than ours) is ours now.
                    // Anything else — a new generation, a `next` that is no time or went
                    // back — is a changed record, read again by the caller.
                    let moved_on = next.parse::<u64>().ok().filter(|n| *n > state.next);
                    match moved_on {
                        Some(n) if gen == state.gen => {
                            state.next = n;
                            state.next_raw = next;
                            state.last = last.and_then(|l| l.parse().ok()).or(state.last);
                            Produced::Stale
                        }
                        _ => Produced::Changed,
                    }
                }
                TickCall::Produced(_) => {
                    state.next = new_next;
                    state.next_raw = new_next.to_string();
                    if let Some(t) = ticks.last() {
                        state.last = Some(*t);
                    }
                    Produced::Ticks { ticks, skipped }
                }
            },
        ))
    }

    /// Upserts the schedule of a `#[scheduled]` fn: its ticks go to the topic of its own name.
    #[doc(hidden)]
    pub async fn upsert_code_schedule(&self, name: &str, schedule: &Schedule) -> Result<()> {
        self.put_schedule(name, schedule, name, super::store::Owner::Code, None)
            .await
            .map(drop)
    }
}
