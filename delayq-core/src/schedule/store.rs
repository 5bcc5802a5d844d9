//! Schedules as users manage them: `upsert_schedule`, `remove_schedule`, `schedules`, and
//! what they report (the records and the index are in records.rs).

use std::time::SystemTime;

use futures_util::StreamExt;
use serde::Serialize;

use super::records::{index_key, record_key, tick_id, Fields, SCHEDULE_SCRIPTS};
use super::spec::{CatchUp, Schedule};
use crate::delay::{state_of, MessageState, TopicKeys};
use crate::error::{Error, Result};
use crate::names::{validate_name, validate_topic};
use crate::producer::Producer;
use crate::time::ms_to_time;

/// What became of a schedule's last tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TickOutcome {
    /// Produced, not yet due or not yet claimed.
    Pending,
    /// A handler runs it now.
    Running,
    /// It failed and waits for its next attempt.
    Retrying,
    /// It went to the dead letters.
    Dead,
    /// Handled (acked), or cancelled.
    Done,
}

impl TickOutcome {
    /// `pending`, `running`, `retrying`, `dead` or `done`.
    pub fn as_str(self) -> &'static str {
        match self {
            TickOutcome::Pending => "pending",
            TickOutcome::Running => "running",
            TickOutcome::Retrying => "retrying",
            TickOutcome::Dead => "dead",
            TickOutcome::Done => "done",
        }
    }
}

/// A schedule as `schedules()` lists it.
#[derive(Debug, Clone)]
pub struct ScheduleInfo {
    /// Its name.
    pub name: String,
    /// The cron pattern, or `every <interval>`.
    pub spec: String,
    /// The time zone of a cron pattern.
    pub tz: String,
    /// What runs of missed ticks.
    pub catch_up: CatchUp,
    /// How late a tick may be produced and still count as on time (see
    /// [`Schedule::misfire_after`]).
    pub misfire_after: std::time::Duration,
    /// The topic its ticks go to (a `#[scheduled]` fn's is its name).
    pub topic: String,
    /// The next tick not produced yet.
    pub next_at: Option<SystemTime>,
    /// The last tick produced.
    pub last_at: Option<SystemTime>,
    /// What became of the last tick.
    pub last_outcome: Option<TickOutcome>,
    /// Whether code owns it (`#[scheduled]`: upserted at every runtime start) rather than
    /// `upsert_schedule`.
    pub from_code: bool,
    /// Whether its next tick is more than [`STALLED_AFTER`] behind Redis' clock: no runtime
    /// produces it (none listens on its topic, or none runs), or its record is broken.
    pub stalled: bool,
    /// Why its record cannot be used (edited by hand, or written by a newer delayq), when it
    /// cannot: runtimes skip it (logging this) and produce the others. The other fields then
    /// hold what could be read (empty or default where nothing could).
    pub error: Option<String>,
}

/// A schedule whose next tick is this far behind Redis' clock is stalled
/// ([`ScheduleInfo::stalled`]): a runtime that produces it writes each tick about a second
/// ahead, and one that was down catches up within a second of starting.
pub const STALLED_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// The fields of a record `schedules()` reads (not the payload).
const LISTED: &[&str] = &[
    "kind",
    "spec",
    "tz",
    "catch_up",
    "misfire_after",
    "owner",
    "next",
    "anchor",
    "last",
];

/// Schedules whose last tick's state `schedules()` looks up at once.
const STATES_IN_FLIGHT: usize = 64;

fn field_ms(fields: &Fields, name: &str) -> Option<u64> {
    fields.get(name).and_then(|v| v.parse().ok())
}

/// Who made a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A `#[scheduled]` fn: upserted at runtime start; its ticks carry no payload of theirs.
    Code,
    /// `upsert_schedule`: its ticks carry its payload to a listener of its topic.
    Dynamic,
}

impl Producer {
    /// Creates or updates the schedule `name`: at each tick of `schedule`, `payload` is sent
    /// to `topic`, where an ordinary `#[delay_listener(topic)]` handles it. Idempotent: the
    /// same spec again keeps the next tick; a changed spec (or zone) applies from the next
    /// tick. Any runtime of the namespace that listens on `topic` produces the ticks, each
    /// exactly once however many run.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName) or
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic);
    /// [`Error::InvalidSchedule`](crate::Error::InvalidSchedule) when the spec has no next tick;
    /// [`Error::Encode`](crate::Error::Encode); [`Error::Redis`](crate::Error::Redis) when Redis
    /// does not answer or refuses the call.
    pub async fn upsert_schedule<T: Serialize + ?Sized>(
        &self,
        name: &str,
        schedule: Schedule,
        topic: &str,
        payload: &T,
    ) -> Result<ScheduleInfo> {
        let payload = self.encode(payload)?;
        self.put_schedule(name, &schedule, topic, Owner::Dynamic, Some(&payload))
            .await?;
        self.schedule(name)
            .await?
            .ok_or_else(|| Error::unexpected("reading back a schedule", &name))
    }

    /// Writes a schedule's record and its index entry (see `upsert.lua`).
    pub(crate) async fn put_schedule(
        &self,
        name: &str,
        schedule: &Schedule,
        topic: &str,
        owner: Owner,
        payload: Option<&[u8]>,
    ) -> Result<()> {
        validate_name("schedule", name)?;
        validate_topic(topic)?;
        self.check_layout().await?;
        self.register_topic(topic).await?;
        let calendar = schedule.calendar()?;
        let now = self.redis_now_ms().await?;
        let (kind, spec) = schedule.stored();
        let anchor = match calendar {
            super::calendar::Calendar::Every(ms) => now.saturating_add(ms),
            super::calendar::Calendar::Cron(..) => now,
        };
        let first = calendar
            .next_after(now, anchor)
            .ok_or_else(|| Error::InvalidSchedule {
                field: "cron".into(),
                reason: format!("{spec:?} has no tick before the year 10000"),
            })?;
        // Moved to another topic: the old record goes (its slot is the old topic's).
        let index = index_key(self.namespace());
        let old_topic: Option<String> = self.hget(&index, name).await?;
        let moved_from = old_topic.filter(|t| t != topic);
        if let Some(old) = &moved_from {
            let old_keys = TopicKeys::on(&self.conn, self.namespace(), old)?;
            self.del(&record_key(&old_keys, name)).await?;
        }
        let keys = TopicKeys::on(&self.conn, self.namespace(), topic)?;
        let mut inv = SCHEDULE_SCRIPTS.upsert.key(record_key(&keys, name));
        inv.arg(kind)
            .arg(spec)
            .arg(schedule.zone())
            .arg(schedule.catch_up_policy().as_str())
            .arg(match owner {
                Owner::Code => "code",
                Owner::Dynamic => "dynamic",
            })
            .arg(topic)
            .arg(if payload.is_some() { "1" } else { "0" })
            .arg(payload.unwrap_or_default())
            .arg(first)
            .arg(anchor)
            .arg(schedule.misfire_after_ms);
        let _: String = self.conn.run_script(inv).await?;
        let mut wake = vec![topic];
        wake.extend(moved_from.as_deref());
        self.index_changed(name, Some(topic), &wake).await
    }

    /// Removes schedule `name`; `false` when there is none. A tick already produced (at most
    /// about a second ahead of its time) still runs.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName); [`Error::Redis`](crate::Error::Redis)
    /// when Redis does not answer or refuses the call.
    pub async fn remove_schedule(&self, name: &str) -> Result<bool> {
        validate_name("schedule", name)?;
        let index = index_key(self.namespace());
        let Some(topic): Option<String> = self.hget(&index, name).await? else {
            return Ok(false);
        };
        let keys = TopicKeys::on(&self.conn, self.namespace(), &topic)?;
        self.del(&record_key(&keys, name)).await?;
        self.index_changed(name, None, &[&topic]).await?;
        Ok(true)
    }

    /// Every schedule of the namespace, by name. A record that cannot be used is listed with
    /// its [`error`](ScheduleInfo::error), never failing the call. Records are read in
    /// pipelines and the last ticks' states concurrently, so the call takes a few round trips
    /// however many schedules there are.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        let index = self.schedule_index().await?;
        let now = self.redis_now_ms().await?;
        // Entries a producer could not have written (a hand-edited index) are errors of theirs.
        let (valid, invalid): (Vec<_>, Vec<_>) = index.into_iter().partition(|(name, topic)| {
            validate_name("schedule", name).is_ok()
                && TopicKeys::on(&self.conn, self.namespace(), topic).is_ok()
        });
        let records = self.records_some_fields(&valid, Some(LISTED)).await?;
        let mut found: Vec<(&str, TopicKeys, Fields)> = Vec::new();
        let mut invalid: Vec<(String, String, String)> = invalid
            .into_iter()
            .map(|(name, topic)| {
                let error = match validate_name("schedule", &name) {
                    Err(e) => e.to_string(),
                    Ok(()) => TopicKeys::on(&self.conn, self.namespace(), &topic)
                        .err()
                        .map(|e| e.to_string())
                        .unwrap_or_default(),
                };
                (name, topic, error)
            })
            .collect();
        for ((name, topic), read) in valid.iter().zip(records) {
            match read {
                Ok(Some((keys, fields))) => found.push((name.as_str(), keys, fields)),
                Ok(None) => {} // removed meanwhile
                Err(error) => invalid.push((name.clone(), topic.clone(), error)),
            }
        }
        // Each future owns what it reads (a borrowing closure would not be `Send` for callers
        // that spawn this).
        let calls: Vec<_> = found
            .iter()
            .map(|(name, keys, fields)| {
                let (name, keys, last) = (name.to_string(), keys.clone(), field_ms(fields, "last"));
                async move { self.last_outcome(&name, &keys, last).await }
            })
            .collect();
        let outcomes: Vec<Result<Option<TickOutcome>>> = futures_util::stream::iter(calls)
            .buffered(STATES_IN_FLIGHT)
            .collect()
            .await;
        let mut out = Vec::with_capacity(found.len() + invalid.len());
        for ((name, keys, fields), outcome) in found.iter().zip(outcomes) {
            out.push(info_of(name, keys.clone(), fields, outcome?, now));
        }
        for (name, topic, error) in invalid {
            out.push(ScheduleInfo {
                name,
                spec: String::new(),
                tz: String::new(),
                catch_up: CatchUp::Last,
                misfire_after: super::spec::DEFAULT_MISFIRE_AFTER,
                topic,
                next_at: None,
                last_at: None,
                last_outcome: None,
                from_code: false,
                stalled: false,
                error: Some(error),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The schedules that are [stalled](ScheduleInfo::stalled) now, by name: the index and
    /// each record's `next` only, in pipelines (what a runtime's gauges read each period).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    #[doc(hidden)]
    pub async fn stalled_schedules(&self) -> Result<Vec<String>> {
        let index: Vec<(String, String)> = self
            .schedule_index()
            .await?
            .into_iter()
            .filter(|(name, topic)| {
                validate_name("schedule", name).is_ok()
                    && TopicKeys::on(&self.conn, self.namespace(), topic).is_ok()
            })
            .collect();
        let now = self.redis_now_ms().await?;
        let stall_ms = STALLED_AFTER.as_millis() as u64;
        let records = self.records_some_fields(&index, Some(&["next"])).await?;
        Ok(index
            .into_iter()
            .zip(records)
            .filter(|(_, read)| match read {
                Ok(None) => false, // removed meanwhile
                Ok(Some((_, fields))) => {
                    field_ms(fields, "next").is_none_or(|n| n.saturating_add(stall_ms) < now)
                }
                Err(_) => true,
            })
            .map(|((name, _), _)| name)
            .collect())
    }

    /// Schedule `name`, if there is one (a record that cannot be used: with its
    /// [`error`](ScheduleInfo::error)).
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName); [`Error::Redis`](crate::Error::Redis)
    /// when Redis does not answer or refuses the call.
    pub async fn schedule(&self, name: &str) -> Result<Option<ScheduleInfo>> {
        match self.schedule_fields(name).await? {
            Some((keys, fields)) => {
                let now = self.redis_now_ms().await?;
                let outcome = self
                    .last_outcome(name, &keys, field_ms(&fields, "last"))
                    .await?;
                Ok(Some(info_of(name, keys, &fields, outcome, now)))
            }
            None => Ok(None),
        }
    }

    /// What became of a record's last tick.
    async fn last_outcome(
        &self,
        name: &str,
        keys: &TopicKeys,
        last: Option<u64>,
    ) -> Result<Option<TickOutcome>> {
        let Some(at) = last else {
            return Ok(None);
        };
        Ok(Some(
            match state_of(&self.conn, keys, &tick_id(name, at)).await? {
                MessageState::Delayed { attempt: 0 } => TickOutcome::Pending,
                MessageState::Delayed { .. } => TickOutcome::Retrying,
                MessageState::InFlight => TickOutcome::Running,
                MessageState::Dead => TickOutcome::Dead,
                MessageState::Gone => TickOutcome::Done,
            },
        ))
    }
}

/// What `schedules()` reports of one record (`now_ms`: Redis' clock).
fn info_of(
    name: &str,
    keys: TopicKeys,
    fields: &Fields,
    last_outcome: Option<TickOutcome>,
    now_ms: u64,
) -> ScheduleInfo {
    let get = |f: &str| fields.get(f).cloned().unwrap_or_default();
    let schedule = Schedule::from_stored(
        &get("kind"),
        &get("spec"),
        &get("tz"),
        &get("catch_up"),
        &get("misfire_after"),
    );
    let next = field_ms(fields, "next");
    // What producers would refuse (see ScheduleState): the spec, and the times they fence on.
    let error = match (&schedule, next, field_ms(fields, "anchor")) {
        (Err(e), ..) => Some(e.to_string()),
        (Ok(_), None, _) => Some(format!(
            "its next tick is not a time: next={:?}",
            get("next")
        )),
        (Ok(_), _, None) => Some(format!(
            "its anchor is not a time: anchor={:?}",
            get("anchor")
        )),
        _ => None,
    };
    let stall_ms = STALLED_AFTER.as_millis() as u64;
    let stalled = error.is_some() || next.is_some_and(|n| n.saturating_add(stall_ms) < now_ms);
    let (spec, tz, catch_up, misfire_after) = match &schedule {
        Ok(s) => (
            s.spec(),
            s.zone().to_string(),
            s.catch_up_policy(),
            s.misfire_threshold(),
        ),
        Err(_) => (
            get("spec"),
            get("tz"),
            get("catch_up").parse().unwrap_or(CatchUp::Last),
            super::spec::DEFAULT_MISFIRE_AFTER,
        ),
    };
    ScheduleInfo {
        name: name.to_string(),
        spec,
        tz,
        catch_up,
        misfire_after,
        topic: keys.topic.to_string(),
        next_at: next.map(ms_to_time),
        last_at: field_ms(fields, "last").map(ms_to_time),
        last_outcome,
        from_code: get("owner") == "code",
        stalled,
        error,
    }
}
