//! Schedules as users manage them: `upsert_schedule`, `remove_schedule`, `schedules`, and
//! what they report (the records and the index are in records.rs).

use std::time::SystemTime;

use serde::Serialize;

use super::records::{index_key, record_key, tick_id, Fields};
use super::spec::{CatchUp, Schedule};
use crate::delay::{state_of, MessageState, TopicKeys};
use crate::error::{Error, Result};
use crate::names::{validate_name, validate_topic};
use crate::producer::Producer;
use crate::script::scripts;
use crate::time::ms_to_time;

scripts!(ScheduleScripts, SCHEDULE_SCRIPTS, "schedule/", "", [upsert]);

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
}

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
            super::calendar::Calendar::Every(ms) => now + ms,
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
        if let Some(old) = old_topic.filter(|t| t != topic) {
            let old_keys = TopicKeys::on(&self.conn, self.namespace(), &old)?;
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
        self.index_changed(|pipe| {
            pipe.cmd("HSET").arg(&index).arg(name).arg(topic);
        })
        .await
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
        self.index_changed(|pipe| {
            pipe.cmd("HDEL").arg(&index).arg(name);
        })
        .await?;
        Ok(true)
    }

    /// Every schedule of the namespace, by name.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        let mut out = Vec::new();
        for (name, topic) in self.schedule_index().await? {
            if let Some((keys, fields)) = self.record_fields(&name, &topic).await? {
                out.push(self.info(&name, keys, &fields).await?);
            }
        }
        Ok(out)
    }

    /// Schedule `name`, if there is one.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName); [`Error::Redis`](crate::Error::Redis)
    /// when Redis does not answer or refuses the call.
    pub async fn schedule(&self, name: &str) -> Result<Option<ScheduleInfo>> {
        match self.schedule_fields(name).await? {
            Some((keys, fields)) => Ok(Some(self.info(name, keys, &fields).await?)),
            None => Ok(None),
        }
    }

    /// What `schedules()` reports of one record: its fields, and where its last tick is.
    async fn info(&self, name: &str, keys: TopicKeys, fields: &Fields) -> Result<ScheduleInfo> {
        let get = |f: &str| fields.get(f).cloned().unwrap_or_default();
        let schedule = Schedule::from_stored(
            &get("kind"),
            &get("spec"),
            &get("tz"),
            &get("catch_up"),
            &get("misfire_after"),
        )?;
        let last = field_ms(fields, "last");
        let last_outcome = match last {
            None => None,
            Some(at) => Some(
                match state_of(&self.conn, &keys, &tick_id(name, at)).await? {
                    MessageState::Delayed { attempt: 0 } => TickOutcome::Pending,
                    MessageState::Delayed { .. } => TickOutcome::Retrying,
                    MessageState::InFlight => TickOutcome::Running,
                    MessageState::Dead => TickOutcome::Dead,
                    MessageState::Gone => TickOutcome::Done,
                },
            ),
        };
        Ok(ScheduleInfo {
            name: name.to_string(),
            spec: schedule.spec(),
            tz: schedule.zone().to_string(),
            catch_up: schedule.catch_up_policy(),
            misfire_after: schedule.misfire_threshold(),
            topic: keys.topic.clone(),
            next_at: field_ms(fields, "next").map(ms_to_time),
            last_at: last.map(ms_to_time),
            last_outcome,
            from_code: get("owner") == "code",
        })
    }
}
