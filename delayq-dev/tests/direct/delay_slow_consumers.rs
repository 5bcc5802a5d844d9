//! Slow consumers: a handler slower than its ack timeout is not redelivered while its process
//! lives; a process frozen past the deadline loses the message to another consumer, and its
//! late ack is refused as stale without deleting the redelivered copy. The consumers'
//! `proc.slow` listener has a 1 s ack timeout.

use std::time::Duration;

use delayq_dev::{drained, envelope, producer, sleep_ms, state, wait_until};
use delayq_dev::{read_ledger, ConsumerProcess, RedisServer};

/// Ledger lines as (payload, attempt, pid).
fn ledger_lines(path: &std::path::Path) -> Vec<(u64, u32, u32)> {
    read_ledger(path)
        .into_iter()
        .map(|l| (l.payload, l.attempt, l.pid))
        .collect()
}

#[tokio::test]
async fn a_live_handler_taking_3x_its_ack_timeout_is_not_redelivered() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let p = producer(&server).await;
    let a = ConsumerProcess::start(&server.url(), &ledger, 3_000);
    let b = ConsumerProcess::start(&server.url(), &ledger, 3_000);
    p.send("proc.slow", &1u64, Duration::ZERO).await.unwrap();
    drained(&p, "proc.slow", Duration::from_secs(20)).await;
    sleep_ms(1_500).await;
    let lines = ledger_lines(&ledger);
    assert_eq!(lines.len(), 1, "handled more than once: {lines:?}");
    assert_eq!(lines[0].1, 1, "first attempt");
    a.stop();
    b.stop();
}

#[tokio::test]
async fn a_frozen_consumer_loses_the_message_and_its_late_ack_is_stale() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let p = producer(&server).await;

    let a = ConsumerProcess::start(&server.url(), &ledger, 3_000);
    let id = p.send("proc.slow", &7u64, Duration::ZERO).await.unwrap();
    wait_until(Duration::from_secs(10), "consumer A to claim", || {
        state(&server, "proc.slow", &id) == "inflight"
    })
    .await;
    a.freeze();
    let first = envelope(&server, "proc.slow", &id).unwrap();
    assert_eq!(first.token, 1);

    // B handles slowly too, so the redelivered copy is still in flight when A thaws.
    let b = ConsumerProcess::start(&server.url(), &ledger, 4_000);
    wait_until(
        Duration::from_secs(10),
        "consumer B to claim the redelivery",
        || envelope(&server, "proc.slow", &id).is_some_and(|e| e.token == 2),
    )
    .await;
    assert_eq!(envelope(&server, "proc.slow", &id).unwrap().attempt, 2);

    a.thaw();
    // A's handler finishes at once (its sleep ran out while frozen), writes the ledger, and
    // its ack is refused.
    wait_until(Duration::from_secs(10), "A's late handling", || {
        ledger_lines(&ledger).iter().any(|l| l.2 == a.pid())
    })
    .await;
    sleep_ms(300).await;
    assert_eq!(
        state(&server, "proc.slow", &id),
        "inflight",
        "A's stale ack deleted B's copy"
    );
    assert_eq!(envelope(&server, "proc.slow", &id).unwrap().token, 2);

    drained(&p, "proc.slow", Duration::from_secs(20)).await;
    let lines = ledger_lines(&ledger);
    let by_a: Vec<_> = lines.iter().filter(|l| l.2 == a.pid()).collect();
    let by_b: Vec<_> = lines.iter().filter(|l| l.2 == b.pid()).collect();
    assert_eq!((by_a.len(), by_b.len()), (1, 1), "{lines:?}");
    assert_eq!((by_a[0].1, by_b[0].1), (1, 2), "attempts");
    assert_eq!(p.counts("proc.slow").await.unwrap().dead, 0);
    a.stop();
    b.stop();
}
