//! Stream listeners and leader tasks on each Redis deployment: a single server, a Redis
//! Cluster (3 primaries, a replica each) and Sentinel. Each test's name carries `single`,
//! `cluster` or `sentinel`; payloads carry the deployment's name, so that the three runs of a
//! test, which share its listener, each count their own.

use std::time::Duration;

use delayq_dev::{sleep_ms, stream_dead_letters, Seen, TestRedis};
use delayq_runtime::{
    leader_task, stream_listener, LeaderLease, Leadership, Producer, Runtime, RuntimeHandle,
    StreamMessage,
};
use serde::{Deserialize, Serialize};

const WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Event {
    on: String,
    n: u32,
}

async fn producer(redis: &TestRedis) -> Producer {
    Producer::connect(&redis.url())
        .await
        .expect("connect a producer")
}

async fn runtime(redis: &TestRedis, streams: &[&str], leaders: &[&str]) -> RuntimeHandle {
    let mut b = Runtime::builder()
        .redis_url(redis.url())
        .shutdown_grace(Duration::from_secs(5));
    if !streams.is_empty() {
        b = b.streams(streams.iter().copied());
    }
    if !leaders.is_empty() {
        b = b.leader_tasks(leaders.iter().copied());
    }
    b.spawn().await.expect("spawn the runtime")
}

delayq_dev::on_each_deployment!(stream_flow, stream_take_over, leader);

// --- handled, dead-lettered, replayed -------------------------------------------------------

static FLOW: Seen<(String, u32, u32)> = Seen::new();

#[stream_listener(
    stream = "dep.stream",
    group = "g",
    max_deliveries = 2,
    min_idle = "500ms",
    backoff = "fixed(10ms)"
)]
async fn on_flow(msg: StreamMessage<Event>) -> Result<(), String> {
    let e = msg.payload().clone();
    FLOW.push((e.on, e.n, msg.deliveries()));
    if e.n == 13 && msg.deliveries() <= 2 {
        return Err("unlucky".into());
    }
    Ok(())
}

async fn stream_flow(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = producer(&redis).await;
    let rt = runtime(&redis, &["dep.stream"], &[]).await;
    for n in 0..30 {
        p.publish("dep.stream", &Event { on: kind.into(), n })
            .await
            .unwrap();
    }
    FLOW.wait_matching(29, WAIT, |e| e.0 == kind && e.1 != 13)
        .await;
    let letters = stream_dead_letters(&p, "dep.stream", "g", 1, WAIT).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].deliveries, 2);
    p.replay_stream_dead("dep.stream", "g", &letters[0].dead_id)
        .await
        .unwrap()
        .expect("replayed");
    // Replayed entries are new entries: delivered once more (deliveries 1 again), and pass.
    let thirteen = FLOW
        .wait_matching(3, WAIT, |e| e.0 == kind && e.1 == 13)
        .await;
    let deliveries: Vec<u32> = thirteen.iter().map(|e| e.2).collect();
    assert_eq!(deliveries, vec![1, 2, 1], "{thirteen:?}");
    rt.shutdown().await.unwrap();
}

// --- a stopped consumer's entries taken over ---------------------------------------------

static SLOW: Seen<(String, u32, u32)> = Seen::new();

#[stream_listener(stream = "dep.slow", group = "g", min_idle = "1s")]
async fn on_slow(msg: StreamMessage<Event>) {
    let e = msg.payload().clone();
    SLOW.push((e.on.clone(), e.n, msg.deliveries()));
    if msg.deliveries() == 1 {
        // The first runtime is dropped while this sleeps.
        tokio::time::sleep(Duration::from_secs(30)).await;
    }
}

async fn stream_take_over(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = producer(&redis).await;
    let first = runtime(&redis, &["dep.slow"], &[]).await;
    for n in 0..5 {
        p.publish("dep.slow", &Event { on: kind.into(), n })
            .await
            .unwrap();
    }
    SLOW.wait_matching(5, WAIT, |e| e.0 == kind && e.2 == 1)
        .await;
    // Dropped, not shut down: like a crash, nothing is handed back.
    drop(first);
    let second = runtime(&redis, &["dep.slow"], &[]).await;
    let again = SLOW
        .wait_matching(5, WAIT, |e| e.0 == kind && e.2 == 2)
        .await;
    assert_eq!(again.len(), 5, "{again:?}");
    second.shutdown().await.unwrap();
}

// --- leader -------------------------------------------------------------------------------

static LED: Seen<u64> = Seen::new();

#[leader_task(name = "dep.leader", every = "100ms", ttl = "1s")]
async fn lead(leader: Leadership) {
    LED.push(leader.token());
}

async fn leader(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = producer(&redis).await;
    let a = LeaderLease::new(&p, "dep.direct", Duration::from_secs(1)).unwrap();
    let b = LeaderLease::new(&p, "dep.direct", Duration::from_secs(1)).unwrap();
    let first = a.try_acquire().await.unwrap().expect("a leads");
    assert!(b.try_acquire().await.unwrap().is_none());
    assert!(a.release().await.unwrap());
    let second = b.try_acquire().await.unwrap().expect("b leads");
    assert!(second.token() > first.token());
    // The runtime's leader task holds its lease on this deployment while it runs, and
    // releases it on shutdown. (LED is shared by the three deployments' runs.)
    let rt = runtime(&redis, &[], &["dep.leader"]).await;
    let outsider = LeaderLease::new(&p, "dep.leader", Duration::from_secs(1)).unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while outsider.holder().await.unwrap() != Some(1) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the runtime never took the lease"
        );
        sleep_ms(20).await;
    }
    assert!(
        outsider.try_acquire().await.unwrap().is_none(),
        "the runtime leads"
    );
    LED.wait_for(1, WAIT).await;
    rt.shutdown().await.unwrap();
    let after = outsider
        .try_acquire()
        .await
        .unwrap()
        .expect("released at shutdown");
    assert_eq!(after.token(), 2, "the runtime led with token 1");
    assert_eq!(outsider.holder().await.unwrap(), Some(2));
}
