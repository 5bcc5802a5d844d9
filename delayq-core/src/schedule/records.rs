//! Where schedules live: one record (a HASH) per schedule in its topic's slot,
//! `ns:{topic}:schedule:<name>`, so that a tick can be fenced on it in the topic's own
//! script; and an index `ns:registry:{schedules}` (name → topic) with, beside it (same slot),
//! a version counter and a change log (name → the version of its last change), all three
//! written at once by `index.lua`. A runtime reads the whole index once, then only what the
//! log names since the version it saw; it learns of a change over the topic's wake-up channel
//! (`WAKE_SCHEDULES`) and, as a safety net, by polling the version.

use std::collections::HashMap;

use crate::delay::TopicKeys;
use crate::error::Result;
use crate::id::MessageId;
use crate::names::validate_name;
use crate::producer::Producer;
use crate::script::scripts;

// The schedule's scripts: `upsert.lua` (store.rs) and `index.lua` (below).
scripts!(
    ScheduleScripts,
    SCHEDULE_SCRIPTS,
    "schedule/",
    "",
    [upsert, index]
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

    /// Sets (`Some(topic)`) or removes (`None`) schedule `name`'s index entry, bumps the
    /// index's version and logs the change (`index.lua`); then wakes this process's producers
    /// and, over each topic of `wake`'s wake-up channel, every runtime listening there (so
    /// that a change made anywhere is taken up at once, not at the next poll).
    pub(super) async fn index_changed(
        &self,
        name: &str,
        topic: Option<&str>,
        wake: &[&str],
    ) -> Result<()> {
        let ns = self.namespace();
        let mut inv = SCHEDULE_SCRIPTS.index.key(index_key(ns));
        inv.key(version_key(ns))
            .key(changes_key(ns))
            .arg(name)
            .arg(topic.unwrap_or(""))
            .arg(CHANGES_KEPT);
        let _: u64 = self.conn.run_script(inv).await?;
        super::CHANGED.notify_waiters();
        for topic in wake {
            let keys = TopicKeys::on(&self.conn, ns, topic)?;
            let (publish, channel) = (keys.publish, &keys.wake);
            // A lost wake-up costs only time (runtimes poll the version too).
            let _: redis::RedisResult<i64> = self
                .conn
                .run(|mut c| async move {
                    redis::cmd(publish)
                        .arg(channel)
                        .arg(super::WAKE_SCHEDULES)
                        .query_async(&mut c)
                        .await
                })
                .await;
        }
        Ok(())
    }

    /// What changed in the index since version `since` (see [`IndexChanges`]).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    #[doc(hidden)]
    pub async fn schedule_changes(&self, since: Option<u64>) -> Result<IndexChanges> {
        let ns = self.namespace();
        let (version, changes) = (version_key(ns), changes_key(ns));
        let version = &version;
        let now: Option<u64> = self
            .conn
            .run(|mut c| async move { redis::cmd("GET").arg(version).query_async(&mut c).await })
            .await?;
        let now = now.unwrap_or(0);
        // Unchanged (every poll of an idle runtime): one command.
        if since == Some(now) {
            return Ok(IndexChanges::Unchanged);
        }
        // The log holds every change after `s` while `s` is recent (and not from before a
        // flush that reset the version).
        let Some(s) = since.filter(|s| *s < now && now - *s <= CHANGES_KEPT) else {
            return Ok(IndexChanges::Reread { version: now });
        };
        let mut cmd = redis::cmd("ZRANGEBYSCORE");
        cmd.arg(&changes)
            .arg(format!("({s}"))
            .arg("+inf")
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(CHANGES_KEPT);
        let cmd = &cmd;
        let log: Vec<(String, u64)> = self
            .conn
            .run(|mut c| async move { cmd.query_async(&mut c).await })
            .await?;
        // A writer of an older delayq bumps the version without logging: the log then does not
        // reach the present version, and only a whole read is sure.
        Ok(if log.iter().map(|(_, v)| *v).max() >= Some(now) {
            IndexChanges::Changed {
                version: log.iter().map(|(_, v)| *v).max().unwrap_or(now),
                names: log.into_iter().map(|(name, _)| name).collect(),
            }
        } else {
            IndexChanges::Reread { version: now }
        })
    }

    /// The topics of schedules `names` in the index (`None`: not there), in one round trip.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    #[doc(hidden)]
    pub async fn schedule_topics(&self, names: &[String]) -> Result<Vec<Option<String>>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let index = index_key(self.namespace());
        let index = &index;
        Ok(self
            .conn
            .run(|mut c| async move {
                redis::cmd("HMGET")
                    .arg(index)
                    .arg(names)
                    .query_async(&mut c)
                    .await
            })
            .await?)
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

/// Versions the change log keeps: a runtime further behind reads the whole index again.
const CHANGES_KEPT: u64 = 10_000;

/// What changed in the schedule index since a version a runtime saw.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexChanges {
    /// Nothing.
    Unchanged,
    /// These schedules changed (were upserted, moved or removed); the index is at `version`.
    Changed {
        /// The index's version now.
        version: u64,
        /// The schedules that changed.
        names: Vec<String>,
    },
    /// Too much changed, or the log does not say (first read, or a flushed or older writer):
    /// read the whole index again.
    Reread {
        /// The index's version now.
        version: u64,
    },
}
