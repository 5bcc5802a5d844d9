// Review: `retry_after(d)` with a huge `d` (a `Retry-After` a server sent, parsed into a
// Duration). settle_failed.rs computes `time_to_ms(now) + millis(d)` unchecked (millis
// saturates at u64::MAX), so the add overflows: a panic in a debug build (wrapping in release,
// and Lua then stores a due time past 2^63 with %d). A send refuses a due time past the year
// 9999; retry_after neither refuses nor clamps. The promise: back after d, attempt not counted.

use std::time::Duration;

use delayq_dev::{producer, sleep_ms, RedisServer, Seen};
use delayq_runtime::{delay_listener, Ack, Message, RetryAfter, Runtime};

static MANUAL: Seen<(u32, String)> = Seen::new();

#[delay_listener(topic = "review.huge.manual", max_attempts = 1)]
async fn manual(msg: Message<u32>, ack: Ack) {
    let r = ack.retry_after(Duration::MAX).await;
    MANUAL.push((msg.attempt(), format!("{r:?}")));
}

#[delay_listener(topic = "review.huge.auto", max_attempts = 1, ack_timeout = "1s")]
async fn auto(_n: u32) -> Result<(), RetryAfter> {
    Err(RetryAfter(Duration::MAX))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_retry_after_does_not_use_up_the_attempt() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["review.huge.manual", "review.huge.auto"])
        .spawn()
        .await
        .unwrap();
    p.send("review.huge.manual", &1u32, Duration::ZERO)
        .await
        .unwrap();
    p.send("review.huge.auto", &2u32, Duration::ZERO)
        .await
        .unwrap();
    sleep_ms(3_000).await;
    let manual = p.counts("review.huge.manual").await.unwrap();
    let auto = p.counts("review.huge.auto").await.unwrap();
    let dead: Vec<String> = p
        .dead_letters("review.huge.manual", 0..10)
        .await
        .unwrap()
        .into_iter()
        .chain(p.dead_letters("review.huge.auto", 0..10).await.unwrap())
        .map(|d| format!("{d:?}").chars().take(400).collect())
        .collect();
    rt.shutdown().await.unwrap();
    assert!(
        manual.dead == 0 && auto.dead == 0,
        "retry_after(Duration::MAX) with max_attempts = 1: manual {manual:?}, auto {auto:?}; \
         handler saw {:?}; dead letters: {dead:?}",
        MANUAL.all()
    );
}
