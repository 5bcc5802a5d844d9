//! `delayq_runtime::start()` in a real process: SIGTERM and SIGINT shut it down gracefully.

use std::time::{Duration, Instant};

use delayq_dev::{drained, producer, sleep_ms};
use delayq_dev::{read_ledger, ConsumerProcess, RedisServer};

async fn running_handlers_finish_before_exit(sig: libc::c_int) {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let p = producer(&server).await;
    let mut child = ConsumerProcess::start(&server.url(), &ledger, 1500);
    p.send_batch("proc.work", (0..10u64).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while p.counts("proc.work").await.unwrap().inflight < 10 {
        assert!(
            Instant::now() < deadline,
            "the consumer never claimed the messages"
        );
        sleep_ms(20).await;
    }
    child.signal(sig);
    let status = child
        .wait_exit(Duration::from_secs(20))
        .expect("the consumer exits within 20 s");
    assert!(status.success(), "exit status {status}");
    // Handlers were mid-run at the signal; the grace period let them finish and ack.
    let counts = drained(&p, "proc.work", Duration::from_secs(1)).await;
    assert_eq!(counts.dead, 0);
    let handled = read_ledger(&ledger);
    assert_eq!(handled.len(), 10, "{handled:?}");
}

#[tokio::test]
async fn sigterm_lets_running_handlers_finish_then_exits_cleanly() {
    running_handlers_finish_before_exit(libc::SIGTERM).await;
}

#[tokio::test]
async fn sigint_does_the_same() {
    running_handlers_finish_before_exit(libc::SIGINT).await;
}
