//! start is all or nothing, so a start refused because a port was taken can be
//! tried again once the port is free. The Prometheus recorder is installed (process-global)
//! before the listeners bind and is not taken back when the bind fails: every later start in
//! the process is refused with "is a metrics recorder installed already?".

use std::net::SocketAddr;

use delayq_dev::{free_port, RedisServer};
use delayq_runtime::{delay_listener, Runtime};

#[delay_listener(topic = "review.retry")]
async fn h(_: u32) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_refused_for_a_taken_port_can_be_retried() {
    let server = RedisServer::start();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let first = Runtime::builder()
        .redis_url(server.url())
        .topics(["review.retry"])
        .prometheus(taken.local_addr().unwrap())
        .spawn()
        .await
        .map(|_| ())
        .unwrap_err();
    println!("first start refused: {first}");
    let free: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let second = Runtime::builder()
        .redis_url(server.url())
        .topics(["review.retry"])
        .prometheus(free)
        .spawn()
        .await;
    match second {
        Ok(h) => h.shutdown().await.unwrap(),
        Err(e) => panic!("the retry on a free port is refused: {e}"),
    }
}
