// Review: a `rate_tat` far past now + burst intervals (left by a slower rate, a process still
// on the old config, a Redis clock stepped back, or a hand edit). At 9b494ae it stalled the
// topic until then. b8eee64 clamps it to now + burst * interval, but that makes
// `limit = floor((now - tat) / interval + burst)` exactly 0, and a claim of nothing never
// writes the clamped value back: every claim clamps again, takes nothing, and says "look
// again in one interval", so the topic stays stalled and the boss polls every interval.

use std::time::Duration;

use delayq_core::protocol::{Flow, TopicKeys};
use delayq_dev::{producer, RedisServer};
use delayq_runtime::__private::Rate;

fn flow(rate: &str) -> Flow {
    Flow {
        rate: Some(Rate::parse(rate).unwrap()),
        ..Flow::default()
    }
}

/// The limit goes from 1/h to 100/s (a config change and a restart, or a second process on
/// the new config): the next claim at 100/s should take a burst at once.
#[tokio::test]
async fn a_rate_raised_from_1_per_hour_to_100_per_second_claims_at_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send_batch("review.tat", (0..50u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    let slow = delayq_core::protocol::queue(&p, "review.tat")
        .unwrap()
        .with_flow(flow("1/h"));
    let first = slow.claim_due(10, Duration::from_secs(30)).await.unwrap();
    assert_eq!(first.claimed.len(), 1, "1/h takes its burst of one");

    let fast = delayq_core::protocol::queue(&p, "review.tat")
        .unwrap()
        .with_flow(flow("100/s"));
    // A second later: 100/s allows well over 100 by now.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    // Within 200 ms at 100/s a claimer following `next_due_ms` takes at least a dozen.
    let mut got = 0;
    let mut last_wait = 0;
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(200) {
        let b = fast.claim_due(10, Duration::from_secs(30)).await.unwrap();
        got += b.claimed.len();
        last_wait = b
            .next_due_ms
            .map(|n| n.saturating_sub(b.now_ms))
            .unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(last_wait.min(50))).await;
    }
    assert!(
        got >= 12,
        "at 100/s after 1/h: {got} claimed in 200 ms; last 'next look' in {last_wait} ms"
    );
}

/// A hand-edited (or garbage) `rate_tat` far in the future: the rate limit should recover
/// within one burst's worth of time, not never.
#[tokio::test]
async fn a_garbage_rate_tat_does_not_stop_the_topic_for_ever() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send_batch("review.tat2", (0..5u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    let keys = TopicKeys::new("delayq", "review.tat2").unwrap();
    redis::cmd("HSET")
        .arg(&keys.farinfo)
        .arg("rate_tat")
        .arg("1e300")
        .query::<()>(&mut server.connection())
        .unwrap();
    let q = delayq_core::protocol::queue(&p, "review.tat2")
        .unwrap()
        .with_flow(flow("100/s"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let first = q.claim_due(10, Duration::from_secs(30)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let batch = q.claim_due(10, Duration::from_secs(30)).await.unwrap();
    let _ = first;
    assert!(
        !batch.claimed.is_empty(),
        "rate_tat = 1e300 at 100/s: claimed {}; next look {:?} (now {})",
        batch.claimed.len(),
        batch.next_due_ms,
        batch.now_ms
    );
}

// --- the same through a runtime: the boss polls every interval and never claims ------------

use delayq_dev::Seen;
use delayq_runtime::{delay_listener, Runtime};

static RAN: Seen<u32> = Seen::new();

#[delay_listener(topic = "review.tat.rt", rate = "100/s")]
async fn tat_rt(n: u32) {
    RAN.push(n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_at_100_per_second_recovers_from_a_far_rate_tat() {
    let server = RedisServer::start();
    let mut c = crate::log_every_command(&server);
    let p = producer(&server).await;
    p.send_batch("review.tat.rt", (0..50u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    // What a process still on `rate = "1/h"` leaves after one claim (now + 1 h).
    let slow = delayq_core::protocol::queue(&p, "review.tat.rt")
        .unwrap()
        .with_flow(flow("1/h"));
    assert_eq!(
        slow.claim_due(1, Duration::from_secs(600))
            .await
            .unwrap()
            .claimed
            .len(),
        1
    );
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query::<()>(&mut c)
        .unwrap();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["review.tat.rt"])
        .spawn()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let log: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query(&mut c)
        .unwrap();
    let claims = log
        .iter()
        .filter(|e| format!("{e:?}").contains("10000 10"))
        .count();
    rt.shutdown().await.unwrap();
    let ran = RAN.len();
    assert!(
        ran >= 49,
        "rate 100/s, 49 due, rate_tat left an hour ahead by 1/h: {ran} ran in 2 s, \
         {claims} claim_due calls"
    );
}
