//! `delayq_runtime::start()` in a real process: SIGTERM and SIGINT shut it down gracefully.

mod common;

use std::process::Child;
use std::time::{Duration, Instant};

use common::{consumer_process, drained, producer, signal, sleep_ms};
use delayq_dev::RedisServer;

async fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("consumer did not exit within {limit:?}");
        }
        sleep_ms(20).await;
    }
}

async fn running_handlers_finish_before_exit(sig: libc::c_int) {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let p = producer(&server).await;
    let mut child = consumer_process(&server, &ledger, 1500);
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
    signal(&child, sig);
    let status = wait_exit(&mut child, Duration::from_secs(20)).await;
    assert!(status.success(), "exit status {status}");
    // Handlers were mid-run at the signal; the grace period let them finish and ack.
    let counts = drained(&p, "proc.work", Duration::from_secs(1)).await;
    assert_eq!(counts.dead, 0);
    let handled = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(handled.lines().count(), 10, "{handled}");
}

#[tokio::test]
async fn sigterm_lets_running_handlers_finish_then_exits_cleanly() {
    running_handlers_finish_before_exit(libc::SIGTERM).await;
}

#[tokio::test]
async fn sigint_does_the_same() {
    running_handlers_finish_before_exit(libc::SIGINT).await;
}
