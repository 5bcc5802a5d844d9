//! The index of schedules, `ns:registry:{schedules}` (name → topic; the records themselves
//! are in records.rs), with, beside it (same slot), a version counter and a change log (name
//! → the version of its last change), all three written at once by `index.lua`. A runtime
//! reads the whole index once, then only what the log names since the version it saw; it
//! learns of a change over the topic's wake-up channel (`WAKE_SCHEDULES`) and, as a safety
//! net, by polling the version.

use std::collections::HashMap;

use super::records::{changes_key, index_key, version_key, SCHEDULE_SCRIPTS};
use crate::delay::TopicKeys;
use crate::error::Result;
use crate::producer::Producer;

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
}
