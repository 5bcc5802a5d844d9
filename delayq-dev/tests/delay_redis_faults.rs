//! Redis itself fails: killed with SIGKILL and restarted from its AOF.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq_dev::{init_tracing, producer, runtime, sleep_ms, Seen};
use delayq_dev::{Persistence, RedisServer};
use delayq_runtime::delay_listener;

// --- kill -9 and restart from the AOF ---------------------------------------------------

static CRASH_ALWAYS: Seen<u64> = Seen::new();
static CRASH_EVERYSEC: Seen<u64> = Seen::new();

#[delay_listener(topic = "crash.always", concurrency = 20, ack_timeout = "2s")]
async fn crash_always(n: u64) {
    CRASH_ALWAYS.push(n);
}

#[delay_listener(topic = "crash.everysec", concurrency = 20, ack_timeout = "2s")]
async fn crash_everysec(n: u64) {
    CRASH_EVERYSEC.push(n);
}

/// Sends for 3 s while Redis is killed at 1 s and restarted 0.5 s later; returns the numbers
/// whose send returned Ok and how many sends failed.
async fn send_through_a_crash(server: &mut RedisServer, topic: &str) -> (BTreeSet<u64>, usize) {
    let p = producer(server).await;
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let failed = Arc::new(Mutex::new(0usize));
    let sender = tokio::spawn({
        let (acked, failed, topic) = (acked.clone(), failed.clone(), topic.to_string());
        async move {
            let started = Instant::now();
            let mut n = 0u64;
            while started.elapsed() < Duration::from_secs(3) {
                let delay = Duration::from_millis(n % 500);
                match p.send(&topic, &n, delay).await {
                    Ok(_) => {
                        acked.lock().unwrap().insert(n);
                    }
                    Err(_) => *failed.lock().unwrap() += 1,
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    sleep_ms(1000).await;
    server.kill9();
    sleep_ms(500).await;
    server.restart();
    sender.await.unwrap();
    let acked = acked.lock().unwrap().clone();
    let failed = *failed.lock().unwrap();
    (acked, failed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_appendfsync_always_every_acknowledged_send_survives_a_redis_kill() {
    init_tracing();
    let mut server = RedisServer::builder()
        .persistence(Persistence::AofAlways)
        .start();
    let rt = runtime(&server, &["crash.always"]).await;
    let (acked, failed) = send_through_a_crash(&mut server, "crash.always").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let handled: BTreeSet<u64> = CRASH_ALWAYS.all().into_iter().collect();
        let missing: Vec<_> = acked.difference(&handled).take(10).collect();
        if missing.is_empty() {
            println!(
                "appendfsync always: {} sends returned Ok, {failed} failed during the outage, all Ok ones handled",
                acked.len()
            );
            break;
        }
        assert!(Instant::now() < deadline, "never handled: {missing:?}");
        sleep_ms(100).await;
    }
    rt.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_appendfsync_everysec_a_redis_kill_can_lose_the_last_second() {
    let mut server = RedisServer::builder()
        .persistence(Persistence::AofEverySec)
        .start();
    let rt = runtime(&server, &["crash.everysec"]).await;
    let (acked, failed) = send_through_a_crash(&mut server, "crash.everysec").await;
    // Let everything that survived come due and be handled.
    let p = producer(&server).await;
    let _ = p.counts("crash.everysec").await; // the first call after the restart may fail once
    delayq_dev::drained(&p, "crash.everysec", Duration::from_secs(60)).await;
    let handled: BTreeSet<u64> = CRASH_EVERYSEC.all().into_iter().collect();
    let lost = acked.difference(&handled).count();
    println!(
        "appendfsync everysec: {} sends returned Ok, {failed} failed during the outage, {lost} Ok'd but lost with the kill",
        acked.len()
    );
    // Only what was written in the last second before the kill can be lost (about 1 s of
    // sends at one per ~2 ms).
    assert!(lost <= 700, "lost {lost}, more than one second of sends");
    assert!(
        handled.len() > acked.len() / 2,
        "the runtime recovered and kept handling"
    );
    rt.shutdown().await.unwrap();
}
