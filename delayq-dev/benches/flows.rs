//! Workflows at scale. Starts its own redis-server (no persistence).
//!
//!     cargo bench --bench flows                    # 100,000 flows of 5 steps
//!     cargo bench --bench flows -- --flows 10000
//!
//! - start: `--flows` flows of 5 steps (a chain of two, then a fan-out of two into one), from 64
//!   tasks at once; flows/s.
//! - memory: Redis' `used_memory` grown per pending step, all steps written and the first of
//!   each flow delayed a minute (so nothing runs yet): what a waiting flow costs.
//! - run: the same flows made due and run to their ends by one runtime; steps/s, and that
//!   every flow ended done.

use std::time::{Duration, Instant};

use delayq_dev::RedisServer;
use delayq_runtime::{delay_listener, Flow, FlowId, FlowState, Producer, Runtime};
use futures_util::StreamExt;

#[delay_listener(topic = "bench.flow.a", concurrency = 200)]
async fn step_a(n: u64) {
    std::hint::black_box(n);
}

#[delay_listener(topic = "bench.flow.b", concurrency = 200)]
async fn step_b(n: u64) {
    std::hint::black_box(n);
}

fn used_memory(server: &RedisServer) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut server.connection())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

fn flow(i: u64, delay: Duration) -> Flow {
    Flow::new()
        .step("fetch", "bench.flow.a", &i)
        .delay(delay)
        .step("parse", "bench.flow.b", &i)
        .after(["fetch"])
        .step("left", "bench.flow.a", &i)
        .after(["parse"])
        .step("right", "bench.flow.b", &i)
        .after(["parse"])
        .step("join", "bench.flow.a", &i)
        .after(["left", "right"])
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = args
        .iter()
        .position(|a| a == "--flows")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let server = RedisServer::start();
    let p = Producer::connect(&server.url()).await.unwrap();
    // Registered once, before the memory is read.
    p.start_flow(flow(u64::MAX, Duration::ZERO)).await.unwrap();
    let before = used_memory(&server);
    let started = Instant::now();
    let ids: Vec<FlowId> = futures_util::stream::iter(0..n)
        .map(|i| {
            let p = p.clone();
            async move {
                p.start_flow(flow(i, Duration::from_secs(60)))
                    .await
                    .unwrap()
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let took = started.elapsed();
    let grown = used_memory(&server) - before;
    println!(
        "start: {n} flows of 5 steps in {:.1} s: {:.0} flows/s",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64()
    );
    println!(
        "memory: {:.0} bytes a waiting flow, {:.0} bytes a pending step",
        grown / n as f64,
        grown / (5 * n) as f64
    );
    // Make the first steps due: the test kit's way, every due time of the topic to now.
    let mut c = server.connection();
    redis::cmd("ZUNIONSTORE")
        .arg("delayq:{bench.flow.a}:delayed")
        .arg(1)
        .arg("delayq:{bench.flow.a}:delayed")
        .arg("WEIGHTS")
        .arg(0)
        .query::<()>(&mut c)
        .unwrap();
    let started = Instant::now();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["bench.flow.a", "bench.flow.b"])
        .spawn()
        .await
        .unwrap();
    let mut done = 0;
    for id in &ids {
        let state = p.wait_flow(id, Duration::from_secs(3600)).await.unwrap();
        if state == Some(FlowState::Done) {
            done += 1;
        }
    }
    let took = started.elapsed();
    println!(
        "run: {} steps in {:.1} s: {:.0} steps/s; {done} of {n} flows done",
        5 * n,
        took.as_secs_f64(),
        (5 * n) as f64 / took.as_secs_f64()
    );
    rt.shutdown().await.unwrap();
}
