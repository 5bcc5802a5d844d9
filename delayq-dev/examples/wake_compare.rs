//! Measures the two ways a sleeping boss can be woken when a message lands earlier than the
//! head of `delayed` (DESIGN.md asks to measure and pick):
//!
//! - **pub/sub** (what delayq uses): the send script PUBLISHes on the topic's wake channel; one
//!   subscriber connection per runtime serves every topic.
//! - **blocking marker**: the send adds to a marker key; each topic's boss waits in BZPOPMIN on
//!   a connection of its own (a blocking command stalls a multiplexed connection).
//!
//! It starts its own redis-server and prints wake-up latency (publisher call to waiter
//! returning) over many rounds, and the connections and idle commands each design needs.
//!
//!     cargo run --release --example wake_compare

use std::time::{Duration, Instant};

use futures_util::StreamExt;

const ROUNDS: usize = 2_000;

fn summary(name: &str, mut us: Vec<u128>) {
    us.sort_unstable();
    let pct = |p: f64| us[((us.len() as f64 - 1.0) * p) as usize];
    println!(
        "{name:<18} p50 {:>5} µs   p90 {:>5} µs   p99 {:>5} µs   max {:>6} µs   ({} rounds)",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        us[us.len() - 1],
        us.len()
    );
}

#[tokio::main]
async fn main() -> redis::RedisResult<()> {
    let server = delayq_dev::RedisServer::start();
    let client = redis::Client::open(server.url())?;
    let mut publisher = client.get_multiplexed_async_connection().await?;

    // pub/sub
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe("bench:{t}:wake").await?;
    let mut messages = pubsub.on_message();
    let mut pubsub_us = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let _: i64 = redis::cmd("PUBLISH")
            .arg("bench:{t}:wake")
            .arg("d")
            .query_async(&mut publisher)
            .await?;
        messages.next().await.expect("a wake-up");
        pubsub_us.push(start.elapsed().as_micros());
    }
    drop(messages);

    // blocking marker
    let mut waiter = client
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await?;
    let mut marker_us = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let wait = tokio::spawn({
            let mut waiter = waiter.clone();
            async move {
                let popped: redis::RedisResult<Option<(String, String, f64)>> =
                    redis::cmd("BZPOPMIN")
                        .arg("bench:{t}:marker")
                        .arg(5)
                        .query_async(&mut waiter)
                        .await;
                (popped, Instant::now())
            }
        });
        // Let the waiter block before the marker is added, as a sleeping boss would be.
        tokio::time::sleep(Duration::from_micros(300)).await;
        let start = Instant::now();
        let _: i64 = redis::cmd("ZADD")
            .arg("bench:{t}:marker")
            .arg(0)
            .arg("m")
            .query_async(&mut publisher)
            .await?;
        let (popped, woke) = wait.await.expect("waiter task");
        popped?.expect("the marker");
        marker_us.push(woke.duration_since(start).as_micros());
    }
    let _: () = redis::cmd("PING").query_async(&mut waiter).await?;

    println!("wake-up latency, Redis {} on this machine:", server.url());
    summary("pub/sub", pubsub_us);
    summary("blocking marker", marker_us);
    println!();
    println!("connections for N topics: pub/sub 1 (shared subscriber); blocking marker N (one blocked BZPOPMIN each)");
    println!("idle commands per topic:  pub/sub 0 while idle; blocking marker 1 BZPOPMIN per timeout period");
    println!("extra work per send:      pub/sub 1 PUBLISH only when the head moves earlier; marker 1 ZADD likewise");
    Ok(())
}
