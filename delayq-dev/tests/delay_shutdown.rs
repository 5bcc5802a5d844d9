//! Shutdown is bounded: with Redis frozen it still returns within the grace period plus 5 s,
//! names what it could not hand back, and those messages come back after their ack deadline.

use std::time::{Duration, Instant};

use delayq_dev::RedisServer;
use delayq_dev::{drained, producer, Seen};
use delayq_runtime::{delay_listener, Error, Message, Runtime};

static FROZEN: Seen<u32> = Seen::new();

/// First deliveries outlast any grace period; later ones finish at once.
#[delay_listener(topic = "shutdown.frozen", ack_timeout = "2s")]
async fn long_first_run(msg: Message<u32>) {
    if msg.attempt() == 1 {
        tokio::time::sleep(Duration::from_secs(120)).await;
    }
    FROZEN.push(*msg.payload());
}

#[tokio::test]
async fn shutdown_with_redis_frozen_returns_within_grace_plus_5s_and_loses_nothing() {
    delayq_dev::init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let grace = Duration::from_secs(2);
    let spawn = || {
        Runtime::builder()
            .redis_url(server.url())
            .topics(["shutdown.frozen"])
            .shutdown_grace(grace)
            .spawn()
    };
    let rt = spawn().await.unwrap();
    p.send_batch("shutdown.frozen", (0..3u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.counts("shutdown.frozen").await.unwrap().inflight < 3 || rt.tracked_claims() < 3 {
        assert!(Instant::now() < deadline, "never claimed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    server.freeze();
    let started = Instant::now();
    let result = rt.shutdown().await;
    let took = started.elapsed();
    server.thaw();
    println!("shutdown with Redis frozen took {took:?}: {result:?}");
    assert!(
        took <= grace + Duration::from_secs(5),
        "shutdown took {took:?}, more than the grace {grace:?} + 5 s"
    );
    assert!(
        matches!(result, Err(Error::Unreturned { count: 3 })),
        "{result:?}"
    );

    // Nothing is lost: after their 2 s ack deadline another runtime delivers them again.
    let rt = spawn().await.unwrap();
    let mut seen = FROZEN.wait_for(3, Duration::from_secs(30)).await;
    seen.sort();
    assert_eq!(seen, [0, 1, 2]);
    assert_eq!(
        drained(&p, "shutdown.frozen", Duration::from_secs(10))
            .await
            .dead,
        0
    );
    rt.shutdown().await.unwrap();
}
