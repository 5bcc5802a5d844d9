//! Stream listeners in one process against a test-kit Redis: entries handled and acked, a
//! poison entry dead-lettered after max_deliveries and replayed for its group only, payloads
//! that do not decode, manual ack with `extend`, and the leader lease's tokens.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use delayq_core::protocol::dead_stream;
use delayq_dev::{
    init_tracing, pending_entries, producer, sleep_ms, stream_dead_letters, stream_runtime,
    wait_until, RedisServer, Seen,
};
use delayq_runtime::{stream_listener, Ack, LeaderLease, PublishOptions, StreamMessage};

static BASIC: Seen<u32> = Seen::new();

#[stream_listener(stream = "st.basic", group = "g", concurrency = 32)]
async fn basic(n: u32) {
    BASIC.push(n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_entries_are_handled_once_and_acked() {
    init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = stream_runtime(&server, &["st.basic"]).await;
    for n in 0..500u32 {
        p.publish("st.basic", &n).await.unwrap();
    }
    let mut seen = BASIC.wait_for(500, Duration::from_secs(20)).await;
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..500).collect::<Vec<_>>(),
        "each entry handled once"
    );
    wait_until(Duration::from_secs(5), "all acked", || {
        pending_entries(&server, "st.basic", "g") == 0
    })
    .await;
    sleep_ms(300).await;
    assert_eq!(BASIC.len(), 500, "nothing handled twice");
    rt.shutdown().await.unwrap();
}

static RESP3: Seen<(String, u32)> = Seen::new();

#[stream_listener(stream = "st.resp3", group = "g", concurrency = 8)]
async fn resp3(msg: StreamMessage<u32>) {
    RESP3.push((msg.id().to_string(), *msg.payload()));
}

/// The reader parses `XREADGROUP` replies itself: over RESP3 they come as maps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_entries_read_over_resp3_are_handled_once_with_their_ids() {
    init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = delayq_runtime::Runtime::builder()
        .redis_url(format!("{}?protocol=resp3", server.url()))
        .streams(["st.resp3"])
        .spawn()
        .await
        .expect("spawn over RESP3");
    let mut ids = Vec::new();
    for n in 0..300u32 {
        ids.push((p.publish("st.resp3", &n).await.unwrap(), n));
    }
    let mut seen = RESP3.wait_for(300, Duration::from_secs(20)).await;
    seen.sort_unstable_by_key(|(_, n)| *n);
    assert_eq!(seen, ids, "each entry handled once, with its id");
    wait_until(Duration::from_secs(5), "all acked", || {
        pending_entries(&server, "st.resp3", "g") == 0
    })
    .await;
    rt.shutdown().await.unwrap();
}

static HEALED: AtomicBool = AtomicBool::new(false);
static POISON_RUNS: Seen<(String, u32)> = Seen::new();
static POISON_OK: Seen<String> = Seen::new();
static OTHER_GROUP: Seen<String> = Seen::new();

#[stream_listener(
    stream = "st.poison",
    group = "g",
    max_deliveries = 3,
    min_idle = "300ms",
    backoff = "fixed(50ms)"
)]
async fn poison(msg: StreamMessage<String>) -> Result<(), String> {
    POISON_RUNS.push((msg.payload().clone(), msg.deliveries()));
    if msg.payload() == "poison" && !HEALED.load(Ordering::SeqCst) {
        return Err("boom".into());
    }
    POISON_OK.push(msg.into_payload());
    Ok(())
}

#[stream_listener(stream = "st.poison", group = "other", min_idle = "300ms")]
async fn other_group(payload: String) {
    OTHER_GROUP.push(payload);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_entry_is_dead_lettered_after_max_deliveries_and_replayed_for_its_group_only() {
    init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = stream_runtime(&server, &["st.poison"]).await;
    for payload in ["a", "poison", "b"] {
        p.publish("st.poison", payload).await.unwrap();
    }
    // The group moves on: the entries after the poison one are handled.
    POISON_OK
        .wait_matching(2, Duration::from_secs(10), |p| p == "a" || p == "b")
        .await;
    let letters = stream_dead_letters(&p, "st.poison", "g", 1, Duration::from_secs(20)).await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!(letter.payload, b"\"poison\"");
    assert_eq!(letter.deliveries, 3);
    assert!(
        letter.reason.contains("max_deliveries"),
        "{}",
        letter.reason
    );
    assert!(letter.reason.contains("boom"), "{}", letter.reason);
    let runs: Vec<u32> = POISON_RUNS
        .all()
        .into_iter()
        .filter(|(p, _)| p == "poison")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(runs, vec![1, 2, 3], "one run per delivery, counted from 1");
    wait_until(Duration::from_secs(5), "the dead letter acked", || {
        pending_entries(&server, "st.poison", "g") == 0
    })
    .await;
    // The other group handled each entry once, the poison one included.
    OTHER_GROUP.wait_for(3, Duration::from_secs(5)).await;

    // Replay: handled by its group again, not by the other group.
    HEALED.store(true, Ordering::SeqCst);
    let replayed = p
        .replay_stream_dead("st.poison", "g", &letter.dead_id)
        .await
        .unwrap();
    assert!(replayed.is_some());
    POISON_OK
        .wait_matching(1, Duration::from_secs(10), |p| p == "poison")
        .await;
    assert!(p
        .stream_dead_letters("st.poison", "g", 0..10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        p.replay_stream_dead("st.poison", "g", &letter.dead_id)
            .await
            .unwrap(),
        None,
        "a dead letter is replayed once"
    );
    wait_until(
        Duration::from_secs(5),
        "the other group acked the replay",
        || pending_entries(&server, "st.poison", "other") == 0,
    )
    .await;
    assert_eq!(OTHER_GROUP.len(), 3, "{:?}", OTHER_GROUP.all());
    rt.shutdown().await.unwrap();
}

static DECODED: Seen<u64> = Seen::new();

#[stream_listener(stream = "st.decode", group = "g", max_deliveries = 5)]
async fn decode(n: u64) {
    DECODED.push(n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_that_do_not_decode_are_dead_lettered_at_once() {
    init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = stream_runtime(&server, &["st.decode"]).await;
    let mut c = server.connection();
    let _: String = redis::cmd("XADD")
        .arg("st.decode")
        .arg("*")
        .arg("payload")
        .arg("not json")
        .query(&mut c)
        .unwrap();
    let _: String = redis::cmd("XADD")
        .arg("st.decode")
        .arg("*")
        .arg("other")
        .arg("x")
        .query(&mut c)
        .unwrap();
    p.publish_with("st.decode", &7u64, PublishOptions::new().max_len(1000))
        .await
        .unwrap();
    DECODED.wait_for(1, Duration::from_secs(10)).await;
    let mut letters = stream_dead_letters(&p, "st.decode", "g", 2, Duration::from_secs(10)).await;
    // Both die at once, in either order; in entry order:
    letters.sort_by(|a, b| a.entry_id.cmp(&b.entry_id));
    assert!(letters[0].reason.contains("does not decode"), "{letters:?}");
    assert_eq!(letters[0].payload, b"not json");
    assert!(letters.iter().all(|l| l.deliveries == 1), "{letters:?}");
    assert!(
        letters[1].reason.contains("no `payload` field"),
        "{letters:?}"
    );
    let len: u64 = redis::cmd("XLEN")
        .arg(dead_stream("st.decode"))
        .query(&mut c)
        .unwrap();
    assert_eq!(len, 2);
    assert_eq!(DECODED.all(), vec![7]);
    // Bad input to the producer: a clear error, nothing written.
    let err = p.publish("bad stream", &1).await.unwrap_err().to_string();
    assert!(err.contains("invalid stream name"), "{err}");
    rt.shutdown().await.unwrap();
}

static EXTENDED: Seen<(String, u32)> = Seen::new();
static EXTEND_ACKS: Seen<Result<(), String>> = Seen::new();

#[stream_listener(stream = "st.extend", group = "g", min_idle = "300ms")]
async fn extended(msg: StreamMessage<String>, ack: Ack) {
    EXTENDED.push((msg.id().to_string(), msg.deliveries()));
    ack.extend(Duration::from_secs(3)).await.unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        EXTEND_ACKS.push(ack.ack().await.map_err(|e| e.to_string()));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_keeps_an_entry_from_being_taken_over_until_a_late_ack() {
    init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = stream_runtime(&server, &["st.extend"]).await;
    p.publish("st.extend", "slow").await.unwrap();
    let acks = EXTEND_ACKS.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(acks, vec![Ok(())]);
    sleep_ms(700).await;
    assert_eq!(EXTENDED.len(), 1, "delivered once: {:?}", EXTENDED.all());
    assert_eq!(pending_entries(&server, "st.extend", "g"), 0);
    rt.shutdown().await.unwrap();
}

#[tokio::test]
async fn leader_lease_tokens_grow_and_a_stale_leader_cannot_renew_or_release() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let a = LeaderLease::new(&p, "leader.test", Duration::from_millis(500)).unwrap();
    let b = LeaderLease::new(&p, "leader.test", Duration::from_millis(500)).unwrap();
    let first = a.try_acquire().await.unwrap().expect("a leads");
    assert!(
        b.try_acquire().await.unwrap().is_none(),
        "one leader at a time"
    );
    assert!(first.is_current().await);
    // a stops renewing: the lease lapses, b leads with a greater token.
    sleep_ms(700).await;
    let second = b
        .try_acquire()
        .await
        .unwrap()
        .expect("b leads after the ttl");
    assert!(second.token() > first.token());
    assert!(!first.is_current().await);
    assert!(!a.renew().await.unwrap(), "a stale leader cannot renew");
    assert!(
        !a.release().await.unwrap(),
        "nor release the new leader's lease"
    );
    assert!(second.is_current().await);
    assert!(b.release().await.unwrap());
    let third = a.try_acquire().await.unwrap().expect("free again");
    assert!(third.token() > second.token());
    let err = LeaderLease::new(&p, "bad name", Duration::from_secs(1))
        .unwrap_err()
        .to_string();
    assert!(err.contains("invalid leader name"), "{err}");
    let err = LeaderLease::new(&p, "ok", Duration::from_millis(10))
        .unwrap_err()
        .to_string();
    assert!(err.contains("minimum"), "{err}");
}

static GONE: Seen<u32> = Seen::new();

#[stream_listener(stream = "st.gone", group = "g", min_idle = "300ms")]
async fn gone(n: u32) {
    GONE.push(n);
}

fn consumers(server: &RedisServer, stream: &str) -> Vec<(String, u64)> {
    let mut c = server.connection();
    let infos: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg(stream)
        .arg("g")
        .query(&mut c)
        .unwrap();
    infos
        .into_iter()
        .map(|i| {
            let name: String = redis::from_redis_value(i["name"].clone()).unwrap();
            let pending: u64 = redis::from_redis_value(i["pending"].clone()).unwrap();
            (name, pending)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_consumers_entries_are_taken_over_and_then_it_leaves_the_group() {
    init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    // A consumer outside the runtime reads an entry and vanishes without acking it.
    let mut c = server.connection();
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("st.gone")
        .arg("g")
        .arg("$")
        .arg("MKSTREAM")
        .query(&mut c)
        .unwrap();
    p.publish("st.gone", &1u32).await.unwrap();
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g")
        .arg("ghost")
        .arg("COUNT")
        .arg(1)
        .arg("STREAMS")
        .arg("st.gone")
        .arg(">")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        consumers(&server, "st.gone"),
        vec![("ghost".to_string(), 1)]
    );
    let rt = stream_runtime(&server, &["st.gone"]).await;
    let me = rt.streams()[0].2.to_string();
    // Taken over after min_idle (the ghost is not alive, so the runtime's consumer draws it).
    assert_eq!(GONE.wait_for(1, Duration::from_secs(10)).await, vec![1]);
    // Gone, holding nothing, idle past the heartbeat ttl: deleted from the group.
    wait_until(Duration::from_secs(10), "the ghost removed", || {
        consumers(&server, "st.gone").iter().all(|(n, _)| *n == me)
    })
    .await;
    assert_eq!(consumers(&server, "st.gone"), vec![(me, 0)]);
    rt.shutdown().await.unwrap();
}
