//! The take-over step (`take_over.lua`): a consumer's heartbeat, its share of the idle
//! entries other consumers hold, and the dead letters that were due.

use std::sync::atomic::Ordering;
use std::time::Duration;

use redis::Value;

use super::group::{StreamGroup, STREAM_SCRIPTS};
use super::reply::{array, text, StreamEntry};
use crate::error::{Error, Result};
use crate::time::millis;

/// What one take-over step did.
#[derive(Debug, Default)]
pub struct TakeOverReport {
    /// Where the next step continues the scan; `None` once it reached the end.
    pub cursor: Option<String>,
    /// Entries this consumer took over (their delivery counts include this one).
    pub claimed: Vec<StreamEntry>,
    /// Entries it moved to the dead-letter stream (delivered `max_deliveries` times).
    pub buried: Vec<String>,
    /// Entries no longer in the stream (trimmed or deleted while pending), moved to the
    /// dead-letter stream with the reason `trimmed`.
    pub trimmed: Vec<String>,
    /// With `count` 0: how many idle entries this consumer would take over with a free slot.
    pub wanted: usize,
}

/// The settings of a take-over step.
#[derive(Debug, Clone, Copy)]
pub struct TakeOver<'a> {
    /// How long this consumer counts as alive after the step.
    pub alive_ttl: Duration,
    /// Entries idle this long may be taken over.
    pub min_idle: Duration,
    /// The most entries the step looks at and claims; 0: heartbeat only, reporting how many
    /// idle entries wait for this consumer (`TakeOverReport::wanted`).
    pub count: usize,
    /// Deliveries after which an entry is dead-lettered instead.
    pub max_deliveries: u32,
    /// Where the scan continues (`None`: from the start).
    pub cursor: Option<&'a str>,
    /// Also remove expired heartbeats and consumers gone with nothing pending.
    pub cleanup: bool,
}

impl StreamGroup {
    /// Heartbeat and this consumer's share of the take-over (see `take_over.lua`).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn take_over(&self, step: TakeOver<'_>) -> Result<TakeOverReport> {
        let mut inv = self.script(&STREAM_SCRIPTS.take_over);
        inv.arg(millis(step.alive_ttl))
            .arg(millis(step.min_idle))
            .arg(step.count)
            .arg(step.max_deliveries)
            .arg(step.cursor.unwrap_or("-"))
            .arg(if step.cleanup { "1" } else { "0" })
            .arg(self.dead_bounds.0)
            .arg(self.dead_bounds.1);
        let reply: Value = self.invoke(inv).await?;
        let parts = array(&reply);
        let bad = || Error::unexpected("stream take_over", &reply);
        let cursor = text(parts.first().ok_or_else(bad)?).filter(|c| c != "-");
        let mut claimed = Vec::new();
        for item in array(parts.get(1).ok_or_else(bad)?) {
            let [id, fields, deliveries] = array(item) else {
                return Err(bad());
            };
            let mut entry = StreamEntry::from_reply(id, fields.clone()).ok_or_else(bad)?;
            entry.deliveries = text(deliveries)
                .and_then(|d| d.parse().ok())
                .ok_or_else(bad)?;
            claimed.push(entry);
        }
        let ids = |i: usize| -> Result<Vec<String>> {
            Ok(array(parts.get(i).ok_or_else(bad)?)
                .iter()
                .filter_map(text)
                .collect())
        };
        let wanted = match parts.get(4) {
            Some(Value::Int(n)) => usize::try_from(*n).unwrap_or(0),
            _ => return Err(bad()),
        };
        if let Some(Value::Int(n)) = parts.get(5) {
            self.dead_dropped
                .fetch_add(u64::try_from(*n).unwrap_or(0), Ordering::Relaxed);
        }
        Ok(TakeOverReport {
            cursor,
            claimed,
            buried: ids(2)?,
            trimmed: ids(3)?,
            wanted,
        })
    }
}
