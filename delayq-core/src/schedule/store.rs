//! Schedules as users manage them: `upsert_schedule` and `remove_schedule` (what
//! `schedules` reports is in info.rs and list.rs, the records and the index in records.rs).

use serde::Serialize;

use super::info::ScheduleInfo;
use super::records::{index_key, record_key, SCHEDULE_SCRIPTS};
use super::spec::Schedule;
use crate::delay::TopicKeys;
use crate::error::{Error, Result};
use crate::names::{validate_name, validate_topic};
use crate::producer::Producer;
use crate::time::ms_to_time;

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
    /// exactly once however many run. The answer's `next_at` is the first tick that will run
    /// after this call (`None` while suspended), as the write saw it: a runtime may produce
    /// that tick at once, after which [`schedule`](Self::schedule) already names the one after.
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
        let first = self
            .put_schedule(name, &schedule, topic, Owner::Dynamic, Some(&payload))
            .await?;
        let mut info = self
            .schedule(name)
            .await?
            .ok_or_else(|| Error::unexpected("reading back a schedule", &name))?;
        // The first tick that will run, as the upsert saw it: by the read-back another
        // process may have produced it and moved the record's `next` on.
        if !info.suspended {
            info.next_at = Some(ms_to_time(first));
        }
        Ok(info)
    }

    /// Writes a schedule's record and its index entry (see `upsert.lua`); returns the first
    /// tick that will run after the write (unix ms).
    pub(crate) async fn put_schedule(
        &self,
        name: &str,
        schedule: &Schedule,
        topic: &str,
        owner: Owner,
        payload: Option<&[u8]>,
    ) -> Result<u64> {
        validate_name("schedule", name)?;
        validate_topic(topic)?;
        self.check_layout().await?;
        self.register_topic(topic).await?;
        let calendar = schedule.calendar()?;
        let now = self.redis_now_ms().await?;
        let (kind, spec) = schedule.stored();
        let (first, anchor) = calendar.start_at(now, &format!("{spec:?}"))?;
        // Moved to another topic: the old record goes (its slot is the old topic's).
        let index = index_key(self.namespace());
        let old_topic: Option<String> = self.hget(&index, name).await?;
        let moved_from = old_topic.filter(|t| t != topic);
        if let Some(old) = &moved_from {
            let old_keys = TopicKeys::on(&self.conn, self.namespace(), old)?;
            self.del_record(&old_keys, name).await?;
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
        let (_, first): (String, String) = self.conn.run_script(inv).await?;
        let first = first
            .parse()
            .map_err(|_| Error::unexpected("upsert.lua's first tick", &first))?;
        let mut wake = vec![topic];
        wake.extend(moved_from.as_deref());
        self.index_changed(name, Some(topic), &wake).await?;
        Ok(first)
    }

    /// Deletes a schedule's record and its history (three keys of one slot).
    async fn del_record(&self, keys: &TopicKeys, name: &str) -> Result<()> {
        let (minutes, hours) = super::history::history_keys(keys, name);
        for key in [record_key(keys, name), minutes, hours] {
            self.del(&key).await?;
        }
        Ok(())
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
        self.del_record(&keys, name).await?;
        self.index_changed(name, None, &[&topic]).await?;
        Ok(true)
    }
}
