//! Waits at scale. Starts its own redis-server (no persistence).
//!
//!     cargo bench --bench waits                    # 10,000 standing waits; 100 rounds of 10,000
//!     cargo bench --bench waits -- --rounds 10
//!
//! - standing: 10,000 waits at once on messages nobody consumes yet: what each costs in this
//!   process (resident memory) and in Redis (`used_memory`), and the connections they take;
//!   then they are dropped, and what they held must go.
//! - a million: `--rounds` rounds of 10,000 sends waited for at once (each round's messages
//!   run by a runtime as the waits stand): resident memory, Redis memory and the waits left
//!   in Redis and in the process, every tenth round. Nothing may grow with the rounds.

use std::time::{Duration, Instant};

use delayq_dev::RedisServer;
use delayq_runtime::{delay_listener, Outcome, Producer, Runtime};

const WAITS: u64 = 10_000;

#[delay_listener(topic = "bench.wait", concurrency = 200)]
async fn doubled(n: u64) -> Result<u64, String> {
    Ok(n * 2)
}

/// This process' resident memory (bytes), from /proc/self/statm.
fn resident() -> f64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(0.0, |pages| pages * 4096.0)
}

fn info_field(server: &RedisServer, section: &str, field: &str) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query(&mut server.connection())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

fn waits_in_redis(server: &RedisServer, topic: &str) -> u64 {
    redis::cmd("ZCARD")
        .arg(format!("delayq:{{{topic}}}:waits"))
        .query(&mut server.connection())
        .unwrap()
}

async fn standing(server: &RedisServer, p: &Producer) {
    let ids = p
        .send_batch(
            "bench.wait.idle",
            (0..WAITS).map(|n| (n, Duration::from_secs(3600))),
        )
        .await
        .unwrap();
    let (rss, mem, clients) = (
        resident(),
        info_field(server, "memory", "used_memory"),
        info_field(server, "clients", "connected_clients"),
    );
    let waits: Vec<_> = ids
        .into_iter()
        .map(|id| {
            let p = p.clone();
            tokio::spawn(async move {
                p.wait::<u64>("bench.wait.idle", &id, Duration::from_secs(600))
                    .await
            })
        })
        .collect();
    while waits_in_redis(server, "bench.wait.idle") < WAITS {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let grown_rss = resident() - rss;
    let grown_mem = info_field(server, "memory", "used_memory") - mem;
    let more_clients = info_field(server, "clients", "connected_clients") - clients;
    println!(
        "standing: {WAITS} waits: {:.0} bytes a wait in this process, {:.0} in Redis; {more_clients} more connections",
        grown_rss / WAITS as f64,
        grown_mem / WAITS as f64
    );
    // What of it is the wait's own future (its state, held by its task).
    let id = delayq_runtime::MessageId::new("size-probe").unwrap();
    let future = p.wait::<u64>("bench.wait.idle", &id, Duration::from_secs(1));
    println!("a wait's future: {} bytes", std::mem::size_of_val(&future));
    drop(future);
    for w in &waits {
        w.abort();
    }
    for w in waits {
        let _ = w.await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.standing_waits() != (0, 0) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "dropped: the process holds {:?} (waits, subscriptions) afterwards",
        p.standing_waits()
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds: u64 = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let server = RedisServer::start();
    let p = Producer::connect(&server.url()).await.unwrap();
    standing(&server, &p).await;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["bench.wait"])
        .spawn()
        .await
        .unwrap();
    let started = Instant::now();
    for round in 1..=rounds {
        let ids = p
            .send_batch("bench.wait", (0..WAITS).map(|n| (n, Duration::ZERO)))
            .await
            .unwrap();
        let waits = ids.into_iter().enumerate().map(|(n, id)| {
            let p = p.clone();
            async move {
                let got = p
                    .wait::<u64>("bench.wait", &id, Duration::from_secs(300))
                    .await;
                assert_eq!(got.unwrap(), Outcome::Done(n as u64 * 2));
            }
        });
        futures_util::future::join_all(waits).await;
        if round == 1 || round % 10 == 0 {
            println!(
                "round {round} ({} waits): resident {:.1} MiB, Redis used_memory {:.1} MiB, waits in Redis {}, in the process {:?}, {:.0} waits/s",
                round * WAITS,
                resident() / 1048576.0,
                info_field(&server, "memory", "used_memory") / 1048576.0,
                waits_in_redis(&server, "bench.wait"),
                p.standing_waits(),
                (round * WAITS) as f64 / started.elapsed().as_secs_f64()
            );
        }
    }
    rt.shutdown().await.unwrap();
}
