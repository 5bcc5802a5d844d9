//! A waiting room's history (see `crate::history`): how many waited and how many were inside,
//! sampled once a minute, in the room's slot.

use std::time::Duration;

use super::waiting_room::WaitingRoom;
use crate::error::Result;
use crate::history::{self, History, Sample, Tally};
use crate::names::validate_name;
use crate::producer::Producer;

/// The minutes and hours of room `name` under `namespace`.
fn history_keys(namespace: &str, name: &str) -> (String, String) {
    (
        format!("{namespace}:{{room:{name}}}:history"),
        format!("{namespace}:{{room:{name}}}:history:hours"),
    )
}

impl WaitingRoom {
    /// Samples how many wait and how many are inside into the room's history. Two script
    /// calls (its counts, then the write).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn record_history(&self) -> Result<()> {
        let c = self.counts().await?;
        let (minutes, hours) = history_keys(self.producer.namespace(), &self.name);
        let sample = Sample::Given([c.waiting, 0, c.active]);
        history::record(
            &self.producer.conn,
            (&minutes, &hours),
            sample,
            &Tally::default(),
        )
        .await
    }
}

impl Producer {
    /// The history of waiting room `name`, as [`topic_history`](Self::topic_history): its
    /// points' `delayed` is how many waited, `inflight` how many were inside.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a malformed name;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn room_history(&self, name: &str, window: Duration) -> Result<History> {
        validate_name("room", name)?;
        let (minutes, hours) = history_keys(self.namespace(), name);
        history::read(&self.conn, name, (&minutes, &hours), window).await
    }
}
