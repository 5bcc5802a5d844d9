//! A schedule's history (see `crate::history`): how its ticks were handled and how late they
//! started, written by the runtimes that handle them, in its topic's slot beside its record.

use std::time::Duration;

use super::records::record_key;
use crate::delay::{TopicKeys, TopicQueue};
use crate::error::Result;
use crate::history::{self, History, Sample, Tally};
use crate::names::validate_name;
use crate::producer::Producer;

/// The minutes and hours of schedule `name` on `keys`' topic: `ns:{t}:schedule-history:<name>`
/// and `ns:{t}:schedule-history-hours:<name>`. Prefixes of their own, so that no schedule's
/// record (`ns:{t}:schedule:<name>`) or other schedule's history can share a key, whatever
/// the names (a name may hold `:`).
pub(crate) fn history_keys(keys: &TopicKeys, name: &str) -> (String, String) {
    let base = keys
        .delayed
        .strip_suffix("delayed")
        .unwrap_or(&keys.delayed);
    (
        format!("{base}schedule-history:{name}"),
        format!("{base}schedule-history-hours:{name}"),
    )
}

/// Adds what this process counted of schedule `name`'s ticks on `queue`'s topic to the
/// schedule's history; `false` when there is no such schedule there (nothing written: an id
/// that only looked like a tick's).
///
/// # Errors
/// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
pub async fn record_schedule_history(
    queue: &TopicQueue,
    name: &str,
    tally: &Tally,
) -> Result<bool> {
    let record = record_key(queue.keys(), name);
    let (minutes, hours) = history_keys(queue.keys(), name);
    history::record(
        queue.conn(),
        (&minutes, &hours),
        Sample::Schedule(record),
        tally,
    )
    .await
}

impl Producer {
    /// The history of schedule `name`'s ticks (how they were handled, how late they started),
    /// as [`topic_history`](Self::topic_history); `None` when there is no such schedule.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName);
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn schedule_history(&self, name: &str, window: Duration) -> Result<Option<History>> {
        validate_name("schedule", name)?;
        let Some(topic) = self
            .schedule_topics(&[name.to_string()])
            .await?
            .pop()
            .flatten()
        else {
            return Ok(None);
        };
        let (minutes, hours) = history_keys(&self.keys(&topic)?, name);
        Ok(Some(
            history::read(&self.conn, name, (&minutes, &hours), window).await?,
        ))
    }
}
