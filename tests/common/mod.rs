//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::time::Duration;

use delayq_core::{Envelope, MessageId, Producer, TopicKeys};
use delayq_dev::RedisServer;

pub async fn producer(server: &RedisServer) -> Producer {
    Producer::connect(&server.url())
        .await
        .expect("connect a producer to the test server")
}

pub fn keys(topic: &str) -> TopicKeys {
    TopicKeys::new("delayq", topic).unwrap()
}

/// The envelope stored for `id`, if any.
pub fn envelope(server: &RedisServer, topic: &str, id: &MessageId) -> Option<Envelope> {
    let raw: Option<Vec<u8>> = redis::cmd("HGET")
        .arg(keys(topic).msg)
        .arg(id.as_str())
        .query(&mut server.connection())
        .unwrap();
    raw.map(|r| Envelope::parse(&r).expect("stored envelope parses"))
}

/// Score of `id` in the named sorted set of `topic` ("delayed", "inflight", "dead").
pub fn score(server: &RedisServer, key: &str, id: &MessageId) -> Option<f64> {
    redis::cmd("ZSCORE")
        .arg(key)
        .arg(id.as_str())
        .query(&mut server.connection())
        .unwrap()
}

/// Which state `id` is in: "delayed", "inflight", "dead" or "gone"; panics when it is in more
/// than one, or in a set without an envelope.
pub fn state(server: &RedisServer, topic: &str, id: &MessageId) -> &'static str {
    let k = keys(topic);
    let mut found = Vec::new();
    for (name, key) in [
        ("delayed", &k.delayed),
        ("inflight", &k.inflight),
        ("dead", &k.dead),
    ] {
        if score(server, key, id).is_some() {
            found.push(name);
        }
    }
    let has_env: bool = redis::cmd("HEXISTS")
        .arg(&k.msg)
        .arg(id.as_str())
        .query(&mut server.connection())
        .unwrap();
    match (found.as_slice(), has_env) {
        ([], false) => "gone",
        ([one], true) => one,
        _ => panic!("{id} is in {found:?} with envelope present = {has_env}"),
    }
}

pub async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}
