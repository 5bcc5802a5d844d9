//! Where schedules live: one record (a HASH) per schedule in its topic's slot,
//! `ns:{topic}:schedule:<name>`, so that a tick can be fenced on it in the topic's own
//! script; and an index `ns:registry:{schedules}` (name → topic) with a version counter
//! beside it (same slot) that runtimes poll to learn of changes.

use std::collections::HashMap;

use crate::delay::TopicKeys;
use crate::error::Result;
use crate::id::MessageId;
use crate::names::validate_name;
use crate::producer::Producer;

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
pub fn tick_id(name: &str, at_ms: u64) -> MessageId {
    MessageId::from_stored(format!("{name}@{at_ms}"))
}

/// The nominal time (unix ms) of the tick with id `id` (see [`tick_id`]): it stays the same
/// across the tick's retries, whose due time moves. `None` for an id that is not a tick's.
pub fn tick_time(id: &str) -> Option<u64> {
    id.rsplit_once('@')?.1.parse().ok()
}

/// A record's fields.
pub(crate) type Fields = HashMap<String, String>;

impl Producer {
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
        self.record_fields(name, &topic).await
    }

    /// The record of schedule `name` whose index entry says `topic` (read from the index
    /// already), if it exists.
    pub(crate) async fn record_fields(
        &self,
        name: &str,
        topic: &str,
    ) -> Result<Option<(TopicKeys, Fields)>> {
        let keys = TopicKeys::on(&self.conn, self.namespace(), topic)?;
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

    pub(super) async fn hget(&self, key: &str, field: &str) -> Result<Option<String>> {
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

    pub(super) async fn del(&self, key: &str) -> Result<()> {
        let _: i64 = self
            .conn
            .run(|mut c| async move { redis::cmd("DEL").arg(key).query_async(&mut c).await })
            .await?;
        Ok(())
    }

    /// Changes the index (`change` adds its command) and bumps its version, in one round trip
    /// (the two share a slot); wakes this process's producers.
    pub(super) async fn index_changed(
        &self,
        change: impl FnOnce(&mut redis::Pipeline),
    ) -> Result<()> {
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
