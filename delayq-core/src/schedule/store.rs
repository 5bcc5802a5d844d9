//! Where schedules live: one record (a HASH) per schedule in its topic's slot,
//! `ns:{topic}:schedule:<name>`, so that a tick can be fenced on it in the topic's own
//! script; and an index `ns:registry:{schedules}` (name → topic, on its own slot) with a
//! version counter beside it that runtimes poll to learn of changes.

use std::collections::HashMap;
use std::time::SystemTime;

use serde::Serialize;

use super::spec::{CatchUp, Schedule};
use crate::delay::{state_of, MessageState, TopicKeys};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::names::{validate_name, validate_topic};
use crate::producer::Producer;
use crate::script::scripts;
use crate::time::ms_to_time;

scripts!(ScheduleScripts, SCHEDULE_SCRIPTS, "schedule/", "", [upsert]);

/// The index of a namespace's schedules: HASH name → topic. It shares a hash tag with its
/// version, so that both change in one pipeline on a cluster too.
pub(crate) fn index_key(namespace: &str) -> String {
    format!("{namespace}:registry:{{schedules}}")
}

/// Bumped by every upsert and removal.
pub(crate) fn version_key(namespace: &str) -> String {
    format!("{namespace}:registry:{{schedules}}:version")
}

/// A schedule's record, in its topic's slot.
pub(crate) fn record_key(keys: &TopicKeys, name: &str) -> String {
    // `ns:{topic}:delayed` → `ns:{topic}:schedule:<name>`
    let base = keys
        .delayed
        .strip_suffix("delayed")
        .unwrap_or(&keys.delayed);
    format!("{base}schedule:{name}")
}

/// The id of a schedule's tick at `at_ms`: the same in every process, so a tick is one message.
pub(crate) fn tick_id(name: &str, at_ms: u64) -> MessageId {
    MessageId::from_stored(format!("{name}@{at_ms}"))
}

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

/// A record's fields.
pub(crate) type Fields = HashMap<String, String>;

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
            .arg(anchor);
        let _: String = self.conn.run_script(inv).await?;
        self.index_changed(|pipe| {
            pipe.cmd("HSET").arg(&index).arg(name).arg(topic);
        })
        .await
    }

    /// Removes schedule `name`; `false` when there is none. A tick already produced (at most
    /// about a second ahead of its time) still runs.
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
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        let mut out = Vec::new();
        for (name, _) in self.schedule_index().await? {
            if let Some(info) = self.schedule(&name).await? {
                out.push(info);
            }
        }
        Ok(out)
    }

    /// Schedule `name`, if there is one.
    pub async fn schedule(&self, name: &str) -> Result<Option<ScheduleInfo>> {
        let Some((keys, fields)) = self.schedule_fields(name).await? else {
            return Ok(None);
        };
        let get = |f: &str| fields.get(f).cloned().unwrap_or_default();
        let schedule =
            Schedule::from_stored(&get("kind"), &get("spec"), &get("tz"), &get("catch_up"))?;
        let last = field_ms(&fields, "last");
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
        Ok(Some(ScheduleInfo {
            name: name.to_string(),
            spec: schedule.spec(),
            tz: schedule.zone().to_string(),
            catch_up: schedule.catch_up_policy(),
            topic: keys.topic.clone(),
            next_at: field_ms(&fields, "next").map(ms_to_time),
            last_at: last.map(ms_to_time),
            last_outcome,
            from_code: get("owner") == "code",
        }))
    }

    /// The index: (name, topic), sorted by name.
    #[doc(hidden)]
    pub async fn schedule_index(&self) -> Result<Vec<(String, String)>> {
        let index = index_key(self.namespace());
        let index = &index;
        let map: HashMap<String, String> = self
            .conn
            .run(|mut c| async move { redis::cmd("HGETALL").arg(index).query_async(&mut c).await })
            .await?;
        let mut all: Vec<(String, String)> = map.into_iter().collect();
        all.sort();
        Ok(all)
    }

    /// A schedule's topic keys and record fields, if it exists.
    pub(crate) async fn schedule_fields(&self, name: &str) -> Result<Option<(TopicKeys, Fields)>> {
        validate_name("schedule", name)?;
        let Some(topic): Option<String> = self.hget(&index_key(self.namespace()), name).await?
        else {
            return Ok(None);
        };
        let keys = TopicKeys::on(&self.conn, self.namespace(), &topic)?;
        let record = record_key(&keys, name);
        let record = &record;
        let fields: Fields = self
            .conn
            .run(|mut c| async move { redis::cmd("HGETALL").arg(record).query_async(&mut c).await })
            .await?;
        Ok((!fields.is_empty()).then_some((keys, fields)))
    }

    /// The index's version: it changes with every upsert and removal.
    #[doc(hidden)]
    pub async fn schedules_version(&self) -> Result<u64> {
        let key = version_key(self.namespace());
        let key = &key;
        let v: Option<u64> = self
            .conn
            .run(|mut c| async move { redis::cmd("GET").arg(key).query_async(&mut c).await })
            .await?;
        Ok(v.unwrap_or(0))
    }

    /// Redis' clock, in unix ms.
    #[doc(hidden)]
    pub async fn redis_now_ms(&self) -> Result<u64> {
        let (s, us): (u64, u64) = self
            .conn
            .run(|mut c| async move { redis::cmd("TIME").query_async(&mut c).await })
            .await?;
        Ok(s * 1_000 + us / 1_000)
    }

    async fn hget(&self, key: &str, field: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .run(|mut c| async move {
                redis::cmd("HGET")
                    .arg(key)
                    .arg(field)
                    .query_async(&mut c)
                    .await
            })
            .await?)
    }

    async fn del(&self, key: &str) -> Result<()> {
        let _: i64 = self
            .conn
            .run(|mut c| async move { redis::cmd("DEL").arg(key).query_async(&mut c).await })
            .await?;
        Ok(())
    }

    /// Changes the index (`change` adds its command) and bumps its version, in one round trip
    /// (the two share a slot); wakes this process's producers.
    async fn index_changed(&self, change: impl FnOnce(&mut redis::Pipeline)) -> Result<()> {
        let version = version_key(self.namespace());
        let mut pipe = redis::pipe();
        change(&mut pipe);
        pipe.cmd("INCR").arg(&version);
        let pipe = &pipe;
        let _: redis::Value = self
            .conn
            .run(|mut c| async move { pipe.query_async(&mut c).await })
            .await?;
        super::CHANGED.notify_waiters();
        Ok(())
    }
}
