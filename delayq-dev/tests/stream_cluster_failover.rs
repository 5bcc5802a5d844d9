//! A sibling of `delay_cluster_promotion` for stream listeners: the primary holding a stream
//! is killed (SIGKILL) while its listener sits in a blocking read; once the replica is
//! promoted, an entry published there is handled within a few seconds, on the same runtime.

use std::time::{Duration, Instant};

use delayq_dev::{sleep_ms, RedisCluster, Seen};
use delayq_runtime::{stream_listener, Producer, Runtime, StreamMessage};

static SEEN: Seen<u64> = Seen::new();

#[stream_listener(stream = "sf.events", group = "g")]
async fn on_event(msg: StreamMessage<u64>) {
    SEEN.push(*msg.payload());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_listener_follows_its_promoted_replica() {
    delayq_dev::init_tracing();
    let mut cluster = RedisCluster::start();
    let url = cluster.url();
    let rt = Runtime::builder()
        .redis_url(&url)
        .streams(["sf.events"])
        .spawn()
        .await
        .unwrap();
    let p = Producer::connect(&url).await.unwrap();
    p.publish("sf.events", &0u64).await.unwrap();
    SEEN.wait_matching(1, Duration::from_secs(10), |n| *n == 0)
        .await;
    // The listener is now in its blocking read on the stream's primary.
    sleep_ms(300).await;
    let victim = cluster.primary_for("sf.events");
    let (killed, promoted) = tokio::task::block_in_place(|| cluster.kill9_until_promoted(victim));
    // Published once the promotion is known to clients (a send right at it may still fail).
    let mut published = None;
    while published.is_none() {
        assert!(
            promoted.elapsed() < Duration::from_secs(10),
            "cannot publish"
        );
        if p.publish("sf.events", &1u64).await.is_ok() {
            published = Some(Instant::now());
        } else {
            sleep_ms(50).await;
        }
    }
    let published = published.unwrap();
    let handled = tokio::time::timeout(
        Duration::from_secs(20),
        SEEN.wait_matching(1, Duration::from_secs(20), |n| *n == 1),
    )
    .await
    .is_ok();
    let took = published.elapsed();
    println!(
        "promoted {:?} after the kill; published {:?} after the promotion; handled: {handled} ({took:?} after publishing)",
        promoted - killed,
        published - promoted
    );
    rt.shutdown().await.unwrap();
    assert!(
        handled,
        "the entry published after the promotion was not handled"
    );
    assert!(
        took <= Duration::from_secs(5),
        "handled {took:?} after publishing"
    );
}
