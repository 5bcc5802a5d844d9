//! A network path that silently drops a connection (a NAT or load balancer forgetting an idle
//! flow: no FIN, no RST) must not leave idle topics deaf. The runtime reaches Redis through a
//! proxy that black-holes every connection it holds; a message sent to an idle topic after
//! that is still handled, over the new connections the runtime opens.

use std::time::{Duration, Instant};

use delayq_dev::{producer, sleep_ms, Seen};
use delayq_dev::{BlackholeProxy, RedisServer};
use delayq_runtime::{delay_listener, Runtime};

static IDLE: Seen<u32> = Seen::new();

#[delay_listener(topic = "net.idle")]
async fn idle_topic(n: u32) {
    IDLE.push(n);
}

#[tokio::test]
async fn an_idle_topic_hears_a_message_sent_after_its_connections_were_black_holed() {
    delayq_dev::init_tracing();
    let server = RedisServer::start();
    let proxy = BlackholeProxy::start(server.port());
    let rt = Runtime::builder()
        .redis_url(proxy.url())
        .topics(["net.idle"])
        .shutdown_grace(Duration::from_secs(1))
        .spawn()
        .await
        .unwrap();
    sleep_ms(1_000).await; // idle: the boss sleeps, waiting for a wake-up
    let before = proxy.connections();
    proxy.blackhole();

    let p = producer(&server).await; // straight to Redis, as another service would
    let sent = Instant::now();
    p.send("net.idle", &42u32, Duration::ZERO).await.unwrap();
    assert_eq!(IDLE.wait_for(1, Duration::from_secs(60)).await, [42]);
    println!(
        "handled {:?} after the send; the runtime opened {} new connections past the black hole",
        sent.elapsed(),
        proxy.connections() - before
    );
    rt.shutdown().await.unwrap();
}
