//! A schedule's history (see `crate::history`): how its ticks were handled and how late they
//! started, written by the runtimes that handle them, in its topic's slot beside its record.

use std::time::Duration;

use super::records::record_key;
use crate::delay::{TopicKeys, TopicQueue};
use crate::error::Result;
use crate::history::{self, History, Tally, HISTORY_SCRIPTS};
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
/// that only looked like a tick's). One script call; see [`record_schedule_histories`].
///
/// # Errors
/// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
pub async fn record_schedule_history(
    queue: &TopicQueue,
    name: &str,
    tally: &Tally,
) -> Result<bool> {
    let written = record_schedule_histories(queue, &[(name, tally)]).await?;
    Ok(written.first().copied().unwrap_or(false))
}

/// As [`record_schedule_history`] for several schedules of `queue`'s topic, in one script call
/// however many (`history/schedules.lua`): whether each was written. The names come from the
/// ids of messages, which anyone who sends chooses, so their number must not set the number
/// of calls. All of them are counts of the same minute (`minute_ended` of the first).
///
/// # Errors
/// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
pub async fn record_schedule_histories(
    queue: &TopicQueue,
    counts: &[(&str, &Tally)],
) -> Result<Vec<bool>> {
    if counts.is_empty() {
        return Ok(Vec::new());
    }
    let mut inv = HISTORY_SCRIPTS.schedules.prepare_invoke();
    let ended = counts[0].1.minute_ended;
    inv.arg(if ended { "1" } else { "0" });
    for (name, tally) in counts {
        let (minutes, hours) = history_keys(queue.keys(), name);
        inv.key(minutes)
            .key(hours)
            .key(record_key(queue.keys(), name))
            .arg(tally.arg());
    }
    let written: Vec<u8> = queue.conn().run_script(inv).await?;
    Ok(written.into_iter().map(|w| w == 1).collect())
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
