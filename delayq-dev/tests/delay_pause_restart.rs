//! A pause is kept in Redis: a runtime started on a paused topic claims nothing until the
//! resume, which it hears at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use delayq_dev::{producer, sleep_ms, RedisServer};
use delayq_runtime::{delay_listener, Runtime};

static RAN: AtomicUsize = AtomicUsize::new(0);

#[delay_listener(topic = "pause.kept")]
async fn kept(_: u32) -> Result<(), String> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_outlives_a_restart_and_a_resume_is_heard_at_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let start = || {
        Runtime::builder()
            .redis_url(server.url())
            .topics(["pause.kept"])
            .spawn()
    };
    let first = start().await.unwrap();
    p.pause("pause.kept").await.unwrap();
    p.send_batch("pause.kept", (0..10u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    sleep_ms(800).await;
    first.shutdown().await.unwrap();
    let second = start().await.unwrap();
    sleep_ms(800).await;
    assert_eq!(RAN.load(Ordering::SeqCst), 0, "a paused topic was claimed");
    let resumed = Instant::now();
    p.resume("pause.kept").await.unwrap();
    while RAN.load(Ordering::SeqCst) < 10 {
        assert!(
            resumed.elapsed() < Duration::from_secs(2),
            "the resume was not heard: {} of 10 ran",
            RAN.load(Ordering::SeqCst)
        );
        sleep_ms(5).await;
    }
    println!("all 10 ran {:?} after the resume", resumed.elapsed());
    second.shutdown().await.unwrap();
}
