//! The producer's calls on messages already sent: cancel, reschedule, and the counts of a
//! topic's states.

use std::time::Duration;

use super::buckets::{declaring, Buckets};
use super::call::on_topic;
use super::scripts;
use super::send_options::{Cancelled, TopicCounts, When};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;

impl Producer {
    /// Cancels a message that has not started.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn cancel(&self, topic: &str, id: &MessageId) -> Result<Cancelled> {
        let keys = self.keys(topic)?;
        let far = Buckets::default().id(&keys, id);
        let reply: String = declaring(&self.conn, &keys, far, |far| {
            scripts::cancel(&keys, far, id)
        })
        .await?;
        match reply.as_str() {
            "removed" => Ok(Cancelled::Removed),
            "inflight" => Ok(Cancelled::InFlight),
            "notfound" => Ok(Cancelled::NotFound),
            _ => Err(Error::unexpected("cancel", &reply)),
        }
    }

    /// Moves a pending message to `delay` from now; `false` when it is not pending.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call;
    /// [`Error::DueTooFar`](crate::Error::DueTooFar).
    pub async fn reschedule(&self, topic: &str, id: &MessageId, delay: Duration) -> Result<bool> {
        let keys = self.keys(topic)?;
        let due = When::Delay(delay).due()?;
        let far = Buckets::default()
            .due(&keys, due.expected_unix_ms())
            .id(&keys, id);
        let n: i64 = declaring(&self.conn, &keys, far, |far| {
            scripts::reschedule(&keys, far, id, due)
        })
        .await?;
        Ok(n == 1)
    }

    /// How many messages of `topic` are delayed, in flight and dead.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn counts(&self, topic: &str) -> Result<TopicCounts> {
        let keys = self.keys(topic)?;
        let mut pipe = redis::pipe();
        pipe.zcard(&keys.delayed)
            .hget(&keys.farinfo, "count")
            // Below +inf: the set's one member at +inf is no claim (see prelude.lua).
            .zcount(&keys.inflight, "-inf", "(+inf")
            .zcard(&keys.dead)
            .zcard(&keys.ready);
        let pipe = &pipe;
        let (hot, far, inflight, dead, ready): (usize, Option<usize>, usize, usize, usize) = self
            .conn
            .retry_once(|| {
                on_topic(&self.conn, &keys, |mut conn| async move {
                    pipe.query_async(&mut conn).await
                })
            })
            .await?;
        Ok(TopicCounts {
            delayed: hot + ready + far.unwrap_or(0),
            inflight,
            dead,
        })
    }
}
