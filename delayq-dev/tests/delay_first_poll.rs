//! A handler's first poll is made outside the waiting for its limit and its renewals (a handler
//! done at it makes no timer): a first poll that blocks long must still be renewed in time, and
//! one that blocks past the limit must not be let finish after it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use delayq_dev::{
    drained, pending_entries, producer, runtime, sleep_ms, stream_runtime, wait_until, RedisServer,
};
use delayq_runtime::{delay_listener, stream_listener};

static PAST_LIMIT: AtomicUsize = AtomicUsize::new(0);

/// Its first poll blocks past its 100 ms limit, then it yields once and finishes.
#[delay_listener(topic = "first.limit", max_attempts = 1, timeout = "100ms")]
async fn blocks_then_yields(_msg: String) -> Result<(), String> {
    std::thread::sleep(Duration::from_millis(300));
    tokio::task::yield_now().await;
    // Code the run reaches only past its hard limit.
    PAST_LIMIT.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_blocked_past_its_limit_is_stopped_at_its_next_yield_and_failed() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["first.limit"]).await;
    p.send("first.limit", &"x".to_string(), Duration::ZERO)
        .await
        .unwrap();
    // Settled either way: dead-lettered (stopped at its limit) or acked (let run past it).
    drained(&p, "first.limit", Duration::from_secs(10)).await;
    sleep_ms(200).await;
    let dead = p.dead_letters("first.limit", 0..10).await.unwrap();
    assert_eq!(
        PAST_LIMIT.load(Ordering::SeqCst),
        0,
        "the handler ran on past its 100ms limit (polled again after it) and was acked; dead letters: {dead:?}"
    );
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].last_error.as_deref(), Some("timed out after 100ms"));
    rt.shutdown().await.unwrap();
}

static LONG_STARTS: AtomicUsize = AtomicUsize::new(0);
static LONG_DONE: AtomicUsize = AtomicUsize::new(0);

/// Its first poll takes 2.2 s of a 3 s ack timeout (past the first renewal, due at 1 s), then
/// it waits 2 s more.
#[delay_listener(topic = "first.renew", concurrency = 2, ack_timeout = "3s")]
async fn long_first_poll(_msg: String) -> Result<(), String> {
    LONG_STARTS.fetch_add(1, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(2200));
    tokio::time::sleep(Duration::from_millis(2000)).await;
    LONG_DONE.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_first_poll_is_renewed_in_time_and_not_delivered_again() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["first.renew"]).await;
    p.send("first.renew", &"x".to_string(), Duration::ZERO)
        .await
        .unwrap();
    wait_until(Duration::from_secs(15), "the run to finish", || {
        LONG_DONE.load(Ordering::SeqCst) >= 1
    })
    .await;
    sleep_ms(3000).await;
    assert_eq!(
        LONG_STARTS.load(Ordering::SeqCst),
        1,
        "delivered again while its first run was still running (lease not renewed in time)"
    );
    rt.shutdown().await.unwrap();
}

static STREAM_STARTS: AtomicUsize = AtomicUsize::new(0);
static STREAM_DONE: AtomicUsize = AtomicUsize::new(0);

/// Its first poll takes 1.2 s of a 1.5 s min_idle, then it waits 2 s more.
#[stream_listener(
    stream = "first.stream",
    group = "g",
    concurrency = 2,
    min_idle = "1500ms"
)]
async fn long_first_stream_poll(_msg: String) {
    STREAM_STARTS.fetch_add(1, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(1200));
    tokio::time::sleep(Duration::from_millis(2000)).await;
    STREAM_DONE.fetch_add(1, Ordering::SeqCst);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_first_poll_of_a_stream_handler_is_renewed_and_not_taken_over() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = stream_runtime(&server, &["first.stream"]).await;
    p.publish("first.stream", &"x".to_string()).await.unwrap();
    wait_until(Duration::from_secs(15), "the run to finish", || {
        STREAM_DONE.load(Ordering::SeqCst) >= 1
    })
    .await;
    sleep_ms(3000).await;
    assert_eq!(
        STREAM_STARTS.load(Ordering::SeqCst),
        1,
        "taken over and run again while its first run was still running (claim not renewed in time)"
    );
    assert_eq!(pending_entries(&server, "first.stream", "g"), 0);
    rt.shutdown().await.unwrap();
}
