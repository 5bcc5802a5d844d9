//! A topic's history with three consumer processes at once and a Redis restart (appendfsync
//! always) while they write the minute's counts: every message is counted once, as `ok`,
//! over all processes and minutes (a write that failed is counted into the next, none twice),
//! and the history goes on after the restart.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{drained, producer, read_ledger, sleep_ms, ConsumerProcess};
use delayq_dev::{Persistence, RedisServer};

const TOPIC: &str = "proc.work";

/// Milliseconds into the current minute of this machine's clock.
fn ms_of_minute() -> u64 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    ms % 60_000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_count_each_message_once_across_a_redis_restart() {
    let mut server = RedisServer::builder()
        .persistence(Persistence::AofAlways)
        .start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let consumers: Vec<ConsumerProcess> = (0..3)
        .map(|_| ConsumerProcess::start(&server.url(), &ledger, 2))
        .collect();
    let p = producer(&server).await;
    // Sends for the rest of this minute and all of the next, 20 every 100 ms.
    let sender = tokio::spawn({
        let p = p.clone();
        async move {
            let mut sent = BTreeSet::new();
            let mut failed = 0usize;
            let mut n = 0u64;
            let until = tokio::time::Instant::now()
                + Duration::from_millis(120_000 - ms_of_minute() + 5_000);
            while tokio::time::Instant::now() < until {
                let batch: Vec<(u64, Duration)> = (n..n + 20)
                    .map(|k| (k, Duration::from_millis(k % 300)))
                    .collect();
                match p.send_batch(TOPIC, batch).await {
                    Ok(_) => sent.extend(n..n + 20),
                    Err(_) => failed += 1,
                }
                n += 20;
                sleep_ms(100).await;
            }
            (sent, failed)
        }
    });
    // Restart Redis in the next minute's history writes (2-3 s after the minute).
    sleep_ms(60_000 - ms_of_minute() + 2_400).await;
    server.stop();
    server.restart();
    let (sent, failed) = sender.await.unwrap();
    drained(&p, TOPIC, Duration::from_secs(60)).await;
    // A clean stop writes each process's last counts.
    for consumer in consumers {
        assert!(
            consumer.stop().is_some_and(|s| s.success()),
            "a consumer's exit"
        );
    }
    let handled: BTreeSet<u64> = read_ledger(&ledger).iter().map(|l| l.payload).collect();
    let runs = read_ledger(&ledger).len();
    let missing: Vec<_> = sent.difference(&handled).take(10).collect();
    assert!(missing.is_empty(), "sent, never handled: {missing:?}");
    let history = p
        .topic_history(TOPIC, Duration::from_secs(3_600))
        .await
        .unwrap();
    let sum = |f: fn(&delayq_core::HistoryPoint) -> u64| history.points.iter().map(f).sum::<u64>();
    let (ok, retry, dead) = (sum(|p| p.ok), sum(|p| p.retry), sum(|p| p.dead));
    let minutes = history.points.iter().filter(|p| p.ok > 0).count();
    println!(
        "{} sent ({failed} batches failed in the restart), {} handled in {runs} runs; \
         history: ok {ok}, retry {retry}, dead {dead}, over {minutes} minutes",
        sent.len(),
        handled.len()
    );
    assert!(minutes >= 2, "points with counts: {minutes}");
    assert_eq!(dead, 0);
    assert_eq!(
        ok,
        handled.len() as u64,
        "each handled message counted once as ok ({runs} runs)"
    );
}
