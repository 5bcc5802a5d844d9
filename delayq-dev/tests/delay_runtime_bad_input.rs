//! Bad input while the runtime runs: a foreign key of the wrong type, a corrupted envelope,
//! and 10,000 distinct topics. Each gets a clear error or a dead letter; no topic gets stuck.

use std::time::Duration;

use delayq_dev::RedisServer;
use delayq_dev::{drained, keys, producer, runtime, sleep_ms, Seen};
use delayq_runtime::delay_listener;

// Each test has its own healthy topic and its own record: tests run in parallel, so one
// test's deliveries must never satisfy another's "the other topic is served" check.
static BESIDE_VICTIM: Seen<u32> = Seen::new();
static BESIDE_MANY: Seen<u32> = Seen::new();
static VICTIM: Seen<u32> = Seen::new();

#[delay_listener(topic = "beside.victim")]
async fn beside_victim(n: u32) {
    BESIDE_VICTIM.push(n);
}

#[delay_listener(topic = "beside.many")]
async fn beside_many(n: u32) {
    BESIDE_MANY.push(n);
}

#[delay_listener(topic = "victim")]
async fn victim(n: u32) {
    VICTIM.push(n);
}

#[tokio::test]
async fn a_foreign_key_of_the_wrong_type_stalls_only_its_topic_until_removed() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["beside.victim", "victim"]).await;
    let k = keys("victim");
    redis::cmd("SET")
        .arg(&k.inflight)
        .arg("not a zset")
        .query::<()>(&mut server.connection())
        .unwrap();
    // A send never touches `inflight`, so it is stored safely; claiming it fails (the
    // runtime logs the error naming the key once and retries with backoff)...
    p.send("victim", &1u32, Duration::ZERO).await.unwrap();
    let q = delayq_core::protocol::queue(&p, "victim").unwrap();
    let err = q.claim_due(1, Duration::from_secs(1)).await.unwrap_err();
    assert!(
        err.to_string().contains("delayq:{victim}:inflight"),
        "{err}"
    );
    // ...while the other topic is served as usual.
    p.send("beside.victim", &1u32, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        BESIDE_VICTIM.wait_for(1, Duration::from_secs(10)).await,
        [1]
    );
    sleep_ms(300).await;
    assert!(VICTIM.all().is_empty());

    // Remove the foreign key: the victim topic resumes without a restart, nothing lost.
    redis::cmd("DEL")
        .arg(&k.inflight)
        .query::<()>(&mut server.connection())
        .unwrap();
    p.send("victim", &2u32, Duration::ZERO).await.unwrap();
    let mut seen = VICTIM.wait_for(2, Duration::from_secs(20)).await;
    seen.sort();
    assert_eq!(seen, [1, 2]);
    rt.shutdown().await.unwrap();
}

static CORRUPT: Seen<u32> = Seen::new();

#[delay_listener(topic = "corrupt")]
async fn corrupt_topic(n: u32) {
    CORRUPT.push(n);
}

#[tokio::test]
async fn a_corrupted_envelope_is_dead_lettered_and_the_rest_delivered() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["corrupt"]).await;
    let k = keys("corrupt");
    let mut c = server.connection();
    redis::cmd("HSET")
        .arg(&k.msg)
        .arg("forged")
        .arg("{\"n\": 1}")
        .query::<()>(&mut c)
        .unwrap();
    redis::cmd("ZADD")
        .arg(&k.delayed)
        .arg(0)
        .arg("forged")
        .query::<()>(&mut c)
        .unwrap();
    p.send("corrupt", &5u32, Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!(CORRUPT.wait_for(1, Duration::from_secs(10)).await, [5]);
    let counts = drained(&p, "corrupt", Duration::from_secs(10)).await;
    assert_eq!(counts.dead, 1);
    let dead = p.dead_letters("corrupt", 0..10).await.unwrap();
    assert_eq!(dead[0].id.as_str(), "forged");
    assert!(
        dead[0].reason.contains("does not parse"),
        "{}",
        dead[0].reason
    );
    rt.shutdown().await.unwrap();
}

#[tokio::test]
async fn ten_thousand_distinct_topics() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["beside.many"]).await;
    let started = std::time::Instant::now();
    for first in (0..10_000u32).step_by(500) {
        let sends = (first..first + 500).map(|t| {
            let p = p.clone();
            async move {
                p.send(&format!("many.{t}"), &t, Duration::from_secs(3600))
                    .await
            }
        });
        let results = futures_util::future::join_all(sends).await;
        assert!(results.iter().all(Result::is_ok));
    }
    let took = started.elapsed();
    let keys: u64 = redis::cmd("DBSIZE")
        .query(&mut server.connection())
        .unwrap();
    // A message whose id (its time, estimated by this machine) and due time (Redis') fall in
    // different far buckets also has a `where` entry: on a loaded machine, some sends cross a
    // minute's boundary between the two.
    let wheres = redis::cmd("KEYS")
        .arg("delayq:{many.*}:where")
        .query::<Vec<String>>(&mut server.connection())
        .unwrap()
        .len() as u64;
    // The runtime's own topic has its history (its sweep samples the backlog): two keys.
    let history = redis::cmd("KEYS")
        .arg("delayq:{beside.many}:history*")
        .query::<Vec<String>>(&mut server.connection())
        .unwrap()
        .len() as u64;
    println!("10,000 topics: sent in {took:?}, {keys} keys in Redis ({wheres} `where`, {history} history)");
    assert_eq!(
        keys - wheres - history,
        30_002,
        "three keys per topic (the far bucket of its one message, the ZSET of far buckets and \
         their count), the registry set of topic names and the layout"
    );
    let registered: u64 = redis::cmd("SCARD")
        .arg("delayq:registry:topics")
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(registered, 10_001, "the 10,000 and the runtime's own");
    assert_eq!(p.counts("many.9999").await.unwrap().delayed, 1);
    // The runtime is unaffected.
    p.send("beside.many", &7u32, Duration::ZERO).await.unwrap();
    assert_eq!(BESIDE_MANY.wait_for(1, Duration::from_secs(10)).await, [7]);
    rt.shutdown().await.unwrap();
}
