//! The keys of one topic. Every key carries the topic in braces, a Redis Cluster hash tag, so
//! one script can touch all of them on a single shard.

use crate::connection::RedisConn;
use crate::error::Result;
use crate::names::{validate_namespace, validate_topic};

/// The Redis keys and the wake-up channel of one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicKeys {
    /// The topic name.
    pub topic: String,
    /// The namespace.
    pub namespace: String,
    /// ZSET id → due time (ms).
    pub delayed: String,
    /// ZSET id → ack deadline (ms).
    pub inflight: String,
    /// HASH id → envelope.
    pub msg: String,
    /// ZSET id → time it died (ms).
    pub dead: String,
    /// STRING: the topic's claim counter; every claim takes its fence token from it.
    pub seq: String,
    /// HASH `<outcome>:<10 s bucket>` → count: what `delayq stats` reports as handled in the
    /// last minute (`ok`, `retry`, `dead`), kept by the scripts; two minutes of buckets.
    pub stats: String,
    /// ZSET of the far buckets not promoted yet: bucket number → a lower bound of the earliest
    /// due time in it. Bucket `b` is the HASH `<far>:<b>` (id → far record).
    pub far: String,
    /// HASH id → far bucket, for the far messages whose id does not tell their bucket (user
    /// ids; a generated id tells it by its time).
    pub far_index: String,
    /// HASH: the topic's running state: `count` (messages in far buckets) and `width` (the
    /// bucket width in ms); `rate_tat` (the rate limit's), `dead_dropped` (dead letters dropped
    /// past the bounds, in all) and `rate` (the rate limit announced). Old builds leave the
    /// fields they do not know alone.
    pub farinfo: String,
    /// STRING, present while the topic is paused: no process claims its messages.
    pub paused: String,
    /// ZSET id → until when (ms) the id stays reserved after its message finished, for
    /// messages sent with `dedup_for`: a send with the id before then is a duplicate.
    pub done: String,
    /// ZSET, for a topic that has had a message with a priority: its due messages, scored by
    /// priority, then due time (`prelude.lua`, "Priorities"); claims take its head.
    pub ready: String,
    /// ZSET, for a topic with `rate_per_key`: message key → the time (µs) its limit counts
    /// from (`claim_due.lua`); a key whose time has passed is removed.
    pub keyrate: String,
    /// HASH, for a topic that has had a message with a priority: id → priority of each
    /// message in `delayed` whose priority is not the default (`prelude.lua`, "Priorities").
    pub priority: String,
    /// HASH: the topic's history, a point a minute for a day (`history.lua`; field: the
    /// minute modulo 1440).
    pub history: String,
    /// HASH: the same a point an hour for 30 days (field: the hour modulo 720).
    pub history_hours: String,
    /// ZSET id → until when (ms) a producer waits for the message to end (`wait`).
    pub waits: String,
    /// HASH id → the outcome kept for the message (`result_ttl`): `done` with the handler's
    /// value, or `cancelled`.
    pub results: String,
    /// ZSET id → when its message ended (ms): past `result_ttl` or `results_max`, the oldest
    /// kept outcomes are dropped (each record also says until when it is read).
    pub results_by: String,
    /// ZSET id → when it ended (ms): the flow steps whose messages ended (acked, dead or
    /// cancelled) and that are not settled in their flow yet (`workflow/`).
    pub steps: String,
    /// Pub/sub channel on which scripts announce that a head moved earlier.
    pub wake: String,
    /// Pub/sub channel on which scripts announce that a message a producer waits for ended
    /// (the wake channel's name with `:end`).
    pub ended: String,
    /// How scripts publish on `wake`: `PUBLISH`, or `SPUBLISH` (sharded) on a cluster.
    pub publish: &'static str,
}

impl TopicKeys {
    /// The keys of `topic` under `namespace`; both are validated.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) or
    /// [`Error::InvalidNamespace`](crate::Error::InvalidNamespace).
    pub fn new(namespace: &str, topic: &str) -> Result<Self> {
        validate_namespace(namespace)?;
        validate_topic(topic)?;
        let key = |suffix: &str| format!("{namespace}:{{{topic}}}:{suffix}");
        Ok(Self {
            topic: topic.to_string(),
            namespace: namespace.to_string(),
            delayed: key("delayed"),
            inflight: key("inflight"),
            msg: key("msg"),
            dead: key("dead"),
            seq: key("seq"),
            stats: key("stats"),
            far: key("far"),
            far_index: key("where"),
            farinfo: key("farinfo"),
            paused: key("paused"),
            done: key("done"),
            ready: key("ready"),
            keyrate: key("keyrate"),
            priority: key("priority"),
            history: key("history"),
            history_hours: key("history:hours"),
            waits: key("waits"),
            results: key("results"),
            results_by: key("results:by"),
            steps: key("steps"),
            wake: key("wake"),
            ended: key("wake:end"),
            publish: "PUBLISH",
        })
    }

    /// The same keys, with wake-ups published sharded (`SPUBLISH`) when `sharded`: on a
    /// cluster a wake-up then reaches only the shard that owns the topic.
    pub fn sharded(mut self, sharded: bool) -> Self {
        self.publish = if sharded { "SPUBLISH" } else { "PUBLISH" };
        self
    }

    /// The data keys with the Redis type delayq keeps in each, for diagnosing WRONGTYPE.
    pub fn typed(&self) -> [(&str, &'static str); 20] {
        [
            (&self.delayed, "zset"),
            (&self.inflight, "zset"),
            (&self.msg, "hash"),
            (&self.dead, "zset"),
            (&self.seq, "string"),
            (&self.stats, "hash"),
            (&self.far, "zset"),
            (&self.far_index, "hash"),
            (&self.farinfo, "hash"),
            (&self.paused, "string"),
            (&self.done, "zset"),
            (&self.ready, "zset"),
            (&self.keyrate, "zset"),
            (&self.priority, "hash"),
            (&self.history, "hash"),
            (&self.history_hours, "hash"),
            (&self.waits, "zset"),
            (&self.results, "hash"),
            (&self.results_by, "zset"),
            (&self.steps, "zset"),
        ]
    }
}

impl TopicKeys {
    /// The keys of `topic` under `namespace`, published the way `conn`'s deployment needs.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) or
    /// [`Error::InvalidNamespace`](crate::Error::InvalidNamespace).
    pub fn on(conn: &RedisConn, namespace: &str, topic: &str) -> Result<TopicKeys> {
        Ok(TopicKeys::new(namespace, topic)?.sharded(conn.is_cluster()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_topic_hash_tag() {
        let k = TopicKeys::new("delayq", "order.timeout").unwrap();
        assert_eq!(k.delayed, "delayq:{order.timeout}:delayed");
        assert_eq!(k.msg, "delayq:{order.timeout}:msg");
        assert_eq!(k.wake, "delayq:{order.timeout}:wake");
    }
}
