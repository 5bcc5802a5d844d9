//! The key layout. Every key of one topic carries the topic in braces, a Redis Cluster hash
//! tag, so one script can touch all of them on a single shard.

use crate::error::{Error, Result};

/// The default namespace, overridden by `DELAYQ_NAMESPACE`.
pub const DEFAULT_NAMESPACE: &str = "delayq";

/// Topic names: `delayq-macros` checks the same rule at compile time for
/// `#[delay_listener(topic = ...)]` (its validate.rs); keep the two in step.
const MAX_TOPIC_LEN: usize = 128;
const MAX_NAMESPACE_LEN: usize = 64;

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

/// Why `name` breaks the topic rule, if it does.
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.len() > MAX_TOPIC_LEN {
        Some(format!("it is {} characters long", name.len()))
    } else {
        name.chars()
            .find(|c| !allowed(*c))
            .map(|c| format!("{c:?} is not allowed"))
    }
}

/// Checks a topic name: 1 to 128 characters from `[A-Za-z0-9._:-]`.
pub fn validate_topic(topic: &str) -> Result<()> {
    match name_problem(topic) {
        None => Ok(()),
        Some(reason) => Err(Error::InvalidTopic {
            topic: topic.to_string(),
            reason,
        }),
    }
}

/// Checks a stream, group or leader-task name (`kind`) by the topic rule.
pub fn validate_name(kind: &'static str, name: &str) -> Result<()> {
    match name_problem(name) {
        None => Ok(()),
        Some(reason) => Err(Error::InvalidName {
            kind,
            name: name.to_string(),
            reason,
        }),
    }
}

/// Checks a namespace: 1 to 64 characters from `[A-Za-z0-9._:-]`.
pub fn validate_namespace(namespace: &str) -> Result<()> {
    if namespace.is_empty()
        || namespace.len() > MAX_NAMESPACE_LEN
        || !namespace.chars().all(allowed)
    {
        return Err(Error::InvalidNamespace {
            namespace: namespace.to_string(),
        });
    }
    Ok(())
}

/// The Redis keys and the wake-up channel of one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicKeys {
    /// The topic name.
    pub topic: String,
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
    /// HASH `count` (messages in far buckets) and `width` (the bucket width in ms).
    pub farinfo: String,
    /// Pub/sub channel on which scripts announce that a head moved earlier.
    pub wake: String,
    /// How scripts publish on `wake`: `PUBLISH`, or `SPUBLISH` (sharded) on a cluster.
    pub publish: &'static str,
}

impl TopicKeys {
    /// The keys of `topic` under `namespace`; both are validated.
    pub fn new(namespace: &str, topic: &str) -> Result<Self> {
        validate_namespace(namespace)?;
        validate_topic(topic)?;
        let key = |suffix: &str| format!("{namespace}:{{{topic}}}:{suffix}");
        Ok(Self {
            topic: topic.to_string(),
            delayed: key("delayed"),
            inflight: key("inflight"),
            msg: key("msg"),
            dead: key("dead"),
            seq: key("seq"),
            stats: key("stats"),
            far: key("far"),
            far_index: key("where"),
            farinfo: key("farinfo"),
            wake: key("wake"),
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
    pub fn typed(&self) -> [(&str, &'static str); 9] {
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
        ]
    }
}

/// What the registry sets of a namespace list (see [`registry_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Registered {
    /// Delay-queue topics, added by the first send and by a runtime that listens.
    Topic,
    /// Streams, added by a runtime with stream listeners and by `publish`.
    Stream,
    /// Waiting rooms, added by `WaitingRoom::enter` and by a runtime that ticks one.
    Room,
}

/// The SET of every name of `kind` used under `namespace`, so that the CLI and dashboard find
/// them without `SCAN`. It has no hash tag: on a cluster it lives on its own slot, so it is
/// written by its own command, never from a topic's script.
pub fn registry_key(namespace: &str, kind: Registered) -> String {
    let what = match kind {
        Registered::Topic => "topics",
        Registered::Stream => "streams",
        Registered::Room => "rooms",
    };
    format!("{namespace}:registry:{what}")
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

    #[test]
    fn topics_are_checked() {
        for ok in ["a", "order.timeout", "A-Z_0:9", &"x".repeat(128)] {
            assert!(validate_topic(ok).is_ok(), "{ok}");
        }
        for bad in ["", "has space", "br{ace}", "ü", &"x".repeat(129), "a/b"] {
            let err = validate_topic(bad).unwrap_err().to_string();
            assert!(err.contains("invalid topic"), "{bad}: {err}");
        }
        assert!(validate_namespace("my-app").is_ok());
        assert!(validate_namespace("my{app}").is_err());
    }
}
