//! Where schedules live: one record (a HASH) per schedule in its topic's slot,
//! `ns:{topic}:schedule:<name>`, so that a tick can be fenced on it in the topic's own
//! script; the keys of the index (index.rs reads and changes it); a tick's id; and reading
//! records, one or many (in pipelines).

use std::collections::HashMap;

use crate::delay::TopicKeys;
use crate::error::Result;
use crate::id::MessageId;
use crate::names::validate_name;
use crate::producer::Producer;
use crate::script::scripts;

// The schedule's scripts: `upsert.lua` (store.rs), `index.lua` (index.rs) and `suspend.lua`
// (control.rs).
scripts!(
    ScheduleScripts,
    SCHEDULE_SCRIPTS,
    "schedule/",
    "",
    [upsert, index, suspend]
);

/// The index of a namespace's schedules: HASH name → topic. It shares a hash tag with its
/// version and change log, so that `index.lua` changes all three on a cluster too.
pub(crate) fn index_key(namespace: &str) -> String {
    format!("{namespace}:registry:{{schedules}}")
}

/// Bumped by every upsert and removal.
pub(crate) fn version_key(namespace: &str) -> String {
    format!("{namespace}:registry:{{schedules}}:version")
}

/// The change log: ZSET name → the version its last upsert or removal made (`index.lua`), so
/// that a runtime reads only the schedules that changed since the version it saw.
pub(crate) fn changes_key(namespace: &str) -> String {
    format!("{namespace}:registry:{{schedules}}:changes")
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

/// The schedule a record's fields describe (see `Schedule::from_stored`).
pub(crate) fn schedule_of(fields: &Fields) -> Result<super::spec::Schedule> {
    let get = |f: &str| fields.get(f).map(String::as_str).unwrap_or_default();
    super::spec::Schedule::from_stored(
        get("kind"),
        get("spec"),
        get("tz"),
        get("catch_up"),
        get("misfire_after"),
    )
}

impl Producer {
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

    /// Redis' clock, in unix ms.
    #[doc(hidden)]
    pub async fn redis_now_ms(&self) -> Result<u64> {
        let (s, us): (u64, u64) = self
            .conn
            .run(|mut c| async move { redis::cmd("TIME").query_async(&mut c).await })
            .await?;
        Ok(s * 1_000 + us / 1_000)
    }

    pub(super) async fn del(&self, key: &str) -> Result<()> {
        let _: i64 = self
            .conn
            .run(|mut c| async move { redis::cmd("DEL").arg(key).query_async(&mut c).await })
            .await?;
        Ok(())
    }

    /// The records of `schedules` ((name, topic) as the index says), read in pipelines of up
    /// to [`RECORDS_PER_CALL`] records of one topic (one slot, so a cluster takes them too);
    /// `Ok(None)` where a record is gone, `Err(why)` where Redis refused to read one (a key of
    /// another type under its name). The answers are in the order asked.
    pub(crate) async fn records_fields(
        &self,
        schedules: &[(String, String)],
    ) -> Result<Vec<RecordFields>> {
        self.records_some_fields(schedules, None).await
    }

    /// The same, reading only `only` of each record's fields when given (`HMGET`: a listing
    /// need not carry every payload).
    pub(crate) async fn records_some_fields(
        &self,
        schedules: &[(String, String)],
        only: Option<&[&str]>,
    ) -> Result<Vec<RecordFields>> {
        let mut by_topic: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, (_, topic)) in schedules.iter().enumerate() {
            by_topic.entry(topic.as_str()).or_default().push(i);
        }
        let mut out: Vec<RecordFields> = vec![Ok(None); schedules.len()];
        for (topic, all) in by_topic {
            // A topic no producer could have written (a hand-edited index): its records' error.
            let keys = match TopicKeys::on(&self.conn, self.namespace(), topic) {
                Ok(keys) => keys,
                Err(e) => {
                    for i in all {
                        out[i] = Err(e.to_string());
                    }
                    continue;
                }
            };
            for batch in all.chunks(RECORDS_PER_CALL) {
                let mut pipe = redis::pipe();
                pipe.ignore_errors();
                for i in batch {
                    let record = record_key(&keys, &schedules[*i].0);
                    match only {
                        None => pipe.cmd("HGETALL").arg(record),
                        Some(fields) => pipe.cmd("HMGET").arg(record).arg(fields),
                    };
                }
                let pipe = &pipe;
                let read: Vec<redis::RedisResult<Fields>> = match only {
                    None => {
                        self.conn
                            .run(|mut c| async move { pipe.query_async(&mut c).await })
                            .await?
                    }
                    Some(fields) => {
                        let values: Vec<redis::RedisResult<Vec<Option<String>>>> = self
                            .conn
                            .run(|mut c| async move { pipe.query_async(&mut c).await })
                            .await?;
                        values
                            .into_iter()
                            .map(|v| {
                                v.map(|v| {
                                    fields
                                        .iter()
                                        .zip(v)
                                        .filter_map(|(f, v)| v.map(|v| (f.to_string(), v)))
                                        .collect()
                                })
                            })
                            .collect()
                    }
                };
                for (i, fields) in batch.iter().zip(read) {
                    out[*i] = match fields {
                        Ok(f) if f.is_empty() => Ok(None),
                        Ok(f) => Ok(Some((keys.clone(), f))),
                        Err(e) => Err(format!("its record cannot be read: {e}")),
                    };
                }
            }
        }
        Ok(out)
    }
}

/// One record as [`Producer::records_fields`] read it.
pub(crate) type RecordFields = std::result::Result<Option<(TopicKeys, Fields)>, String>;

/// Records one pipeline reads at most.
pub const RECORDS_PER_CALL: usize = 500;
