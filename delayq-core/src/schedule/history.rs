//! A schedule's history (see `crate::history`): how its ticks were handled and how late they
//! started, written by the runtimes that handle them, in its topic's slot beside its record.

use std::time::Duration;

use super::records::record_key;
use crate::delay::TopicQueue;
use crate::error::Result;
use crate::history::{self, History, Sample, Tally};
use crate::names::validate_name;
use crate::producer::Producer;

/// The minutes and hours of the schedule whose record is `record`.
pub(crate) fn history_keys(record: &str) -> (String, String) {
    (
        format!("{record}:history"),
        format!("{record}:history:hours"),
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
    let (minutes, hours) = history_keys(&record);
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
        let record = record_key(&self.keys(&topic)?, name);
        let (minutes, hours) = history_keys(&record);
        Ok(Some(
            history::read(&self.conn, name, (&minutes, &hours), window).await?,
        ))
    }
}
