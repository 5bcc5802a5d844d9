//! `ready_checks = "none"` (the new default) only leaves Redis out of *readiness*;
//! API.md still promises `RuntimeHandle::health()` reports `redis: Up | Down { since }`. With
//! the default, `check()` never sends its PING, so a runtime that has no delay listener (a
//! stream consumer; the wake-up subscriber is what notices otherwise) reports Redis `Up`
//! while it is stopped. (Before the default changed, health() pinged and said Down.)

use std::time::{Duration, Instant};

use delayq_dev::RedisServer;
use delayq_runtime::{stream_listener, RedisHealth, Runtime};

#[stream_listener(stream = "review.hs", group = "g")]
async fn entries(_e: u32) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_says_redis_is_down_while_it_is_stopped() {
    let mut server = RedisServer::start();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .streams(["review.hs"])
        .spawn()
        .await
        .unwrap();
    assert_eq!(rt.health().await.redis, RedisHealth::Up);
    server.stop();
    let stopped = Instant::now();
    let mut last = rt.health().await.redis;
    while stopped.elapsed() < Duration::from_secs(5) && last == RedisHealth::Up {
        tokio::time::sleep(Duration::from_millis(250)).await;
        last = rt.health().await.redis;
    }
    println!("5 s after Redis stopped, health().redis = {last:?}");
    server.restart();
    let down = !matches!(last, RedisHealth::Up);
    rt.shutdown().await.unwrap();
    assert!(down, "health() says Redis is Up 5 s after it stopped");
}
