//! A topic's history (see `crate::history`), in the topic's slot.

use std::time::Duration;

use super::queue::TopicQueue;
use crate::error::Result;
use crate::history::{self, History, Sample, Tally};
use crate::producer::Producer;

impl TopicQueue {
    /// Adds what this process counted (`tally`) to the topic's history, with a sample of its
    /// backlog, in the minute that just ended by Redis' clock. One script call.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn record_history(&self, tally: &Tally) -> Result<()> {
        let k = &self.keys;
        let sample = Sample::Topic([&k.delayed, &k.ready, &k.inflight, &k.farinfo]);
        history::record(&self.conn, (&k.history, &k.history_hours), sample, tally).await
    }
}

impl Producer {
    /// The history of `topic` over the last `window` (a point a minute up to a day, an hour
    /// beyond, at most 30 days).
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn topic_history(&self, topic: &str, window: Duration) -> Result<History> {
        let k = self.keys(topic)?;
        history::read(&self.conn, topic, (&k.history, &k.history_hours), window).await
    }
}
