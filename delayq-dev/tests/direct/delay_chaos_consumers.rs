//! Chaos: 4 consumer processes, one killed with SIGKILL every 300 ms and replaced, for 10 s,
//! while 20,000 messages come due over 3 s. Every message is handled at least once, nothing
//! is left behind, and the duplicate count is printed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use delayq_dev::{drained, producer, sleep_ms};
use delayq_dev::{read_ledger, ConsumerProcess, RedisServer};

const MESSAGES: u64 = 20_000;
const CONSUMERS: usize = 4;
/// 50 ms per message: 20,000 messages keep 4 × 32 slots busy through most of the chaos
/// window, so kills land on claimed, half-handled messages.
const HANDLER_MS: u64 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_consumers_at_random_loses_no_message() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let p = producer(&server).await;

    let start = || ConsumerProcess::start(&server.url(), &ledger, HANDLER_MS);
    let mut consumers: Vec<ConsumerProcess> = (0..CONSUMERS).map(|_| start()).collect();
    let mut rng = fastrand::Rng::with_seed(7);
    let items: Vec<_> = (0..MESSAGES)
        .map(|n| (n, Duration::from_millis(rng.u64(0..3000))))
        .collect();
    for chunk in items.chunks(2_000) {
        p.send_batch("proc.work", chunk.to_vec()).await.unwrap();
    }

    let chaos_until = Instant::now() + Duration::from_secs(10);
    let mut kills = 0;
    while Instant::now() < chaos_until {
        sleep_ms(300).await;
        let victim = rng.usize(0..CONSUMERS);
        consumers[victim].kill9();
        consumers[victim] = start();
        kills += 1;
    }

    // Claims of killed consumers come back after their 5 s ack deadline.
    let counts = drained(&p, "proc.work", Duration::from_secs(60)).await;
    for c in consumers {
        c.stop();
    }

    let mut handled: HashMap<u64, u32> = HashMap::new();
    for line in read_ledger(&ledger) {
        *handled.entry(line.payload).or_default() += 1;
    }
    let lost: Vec<u64> = (0..MESSAGES).filter(|n| !handled.contains_key(n)).collect();
    let duplicates: u32 = handled.values().map(|c| c - 1).sum();
    println!(
        "chaos: {MESSAGES} messages, {kills} consumers killed with SIGKILL, {} handled, {} lost, {duplicates} duplicate handlings, final {counts:?}",
        handled.len(),
        lost.len()
    );
    assert!(kills >= 30, "only {kills} kills");
    assert!(
        lost.is_empty(),
        "lost {} messages, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
    assert_eq!(counts.dead, 0);
}
