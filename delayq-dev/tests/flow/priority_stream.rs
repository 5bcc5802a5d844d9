// Priorities under a steady stream of high messages: what low ones get. Priorities are strict
// (API.md: "among due messages higher priority is claimed first"): while due high messages
// are waiting, no low one starts; a stream that leaves the consumers spare capacity leaves it
// to the low ones, which then run while the stream goes on.

use std::time::{Duration, Instant};

use delayq_core::{Priority, SendOptions};
use delayq_dev::{producer, sleep_ms, RedisServer, Seen};
use delayq_runtime::delay_listener;

/// (tag, when it started) of each run.
static SPARE: Seen<(String, Instant)> = Seen::new();

/// 100 runs a second at most (one at a time, 10 ms each).
#[delay_listener(topic = "flow.prio.spare", concurrency = 1)]
async fn spare_handler(tag: String) {
    SPARE.push((tag, Instant::now()));
    sleep_ms(10).await;
}

/// High messages at about 20 a second for three seconds, a fifth of what the consumer can do:
/// the 30 low ones due from the start all run while the stream goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_messages_get_the_capacity_a_steady_high_stream_leaves() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.prio.spare";
    let rt = crate::runtime(&server, t).await;
    let high = || SendOptions::new().priority(Priority::High);
    p.send_with(t, &"high-first".to_string(), high())
        .await
        .unwrap();
    for i in 0..30 {
        let low = SendOptions::new().priority(Priority::Low);
        p.send_with(t, &format!("low-{i}"), low).await.unwrap();
    }
    let started = Instant::now();
    for i in 0..60 {
        p.send_with(t, &format!("high-{i}"), high()).await.unwrap();
        sleep_ms(50).await;
    }
    let stream_ended = Instant::now();
    let runs = SPARE.wait_for(91, Duration::from_secs(20)).await;
    rt.shutdown().await.unwrap();
    let last_low = runs
        .iter()
        .filter(|(tag, _)| tag.starts_with("low-"))
        .map(|(_, at)| *at)
        .max()
        .unwrap();
    assert!(
        last_low < stream_ended,
        "the last low message started {:?} after the high stream began, which lasted {:?}",
        last_low - started,
        stream_ended - started
    );
}

static SATURATED: Seen<String> = Seen::new();

/// 50 runs a second at most.
#[delay_listener(topic = "flow.prio.saturated", concurrency = 1)]
async fn saturated_handler(tag: String) {
    SATURATED.push(tag);
    sleep_ms(20).await;
}

/// High messages at about 100 a second, twice what the consumer can do: a backlog of high
/// ones is due the whole time, and no low one starts until it has drained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_messages_wait_while_high_ones_are_due() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.prio.saturated";
    let high = |i: usize| {
        (
            format!("high-{i}"),
            SendOptions::new().priority(Priority::High),
        )
    };
    for i in 0..10 {
        let (tag, opts) = high(i);
        p.send_with(t, &tag, opts).await.unwrap();
    }
    for i in 0..10 {
        let low = SendOptions::new().priority(Priority::Low);
        p.send_with(t, &format!("low-{i}"), low).await.unwrap();
    }
    let rt = crate::runtime(&server, t).await;
    for i in 10..110 {
        let (tag, opts) = high(i);
        p.send_with(t, &tag, opts).await.unwrap();
        sleep_ms(10).await;
    }
    let runs = SATURATED.wait_for(120, Duration::from_secs(30)).await;
    rt.shutdown().await.unwrap();
    let first_low = runs.iter().position(|tag| tag.starts_with("low-")).unwrap();
    assert_eq!(
        first_low,
        110,
        "a low message started while high ones were due: {:?}",
        &runs[first_low.saturating_sub(3)..(first_low + 3).min(runs.len())]
    );
}
