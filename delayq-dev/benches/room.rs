//! The waiting room's benchmarks. Starts its own redis-server (no persistence).
//!
//!     cargo bench --bench room
//!
//! - status at 1,000 and at 1,000,000 waiting: 10,000 `status` calls one after another on
//!   random tokens of the line; p50 / p99 of the call (client round trip) and Redis µs a call.
//! - enter: 20,000 `enter` calls from 50 tasks at once; enters/s.
//! - admit: one tick admitting 10,000 of 1,000,000 waiting; Redis µs of that script call.
//!
//! The lines are seeded straight into Redis (`ZADD` in pipelines) in the room's own layout.

use std::time::{Duration, Instant};

use delayq_dev::RedisServer;
use delayq_runtime::{Producer, RoomConfig, WaitingRoom};

const ROOM: &str = "bench";

fn token(i: u64) -> String {
    format!(
        "{:032x}",
        (i as u128 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
    )
}

/// `cmdstat_evalsha` (calls, usec).
fn evalsha(server: &RedisServer) -> (f64, f64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .unwrap();
    let line = info
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .unwrap_or("");
    let field = |key: &str| -> f64 {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    (field("calls="), field("usec="))
}

/// Flushes and seeds `n` waiting tokens, touched now.
fn seed(server: &RedisServer, n: u64) {
    seed_touched(server, n, 0);
}

/// Flushes and seeds `n` waiting tokens: the first `now_from` touched now, the rest an hour
/// from now (so that they stay fresh whatever the room's waiting_ttl).
fn seed_touched(server: &RedisServer, n: u64, later_from: u64) {
    let mut c = server.connection();
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let key = |s: &str| format!("delayq:{{room:{ROOM}}}:{s}");
    for start in (0..n).step_by(10_000) {
        let end = (start + 10_000).min(n);
        let mut waiting = redis::cmd("ZADD");
        waiting.arg(key("line"));
        let mut touched = redis::cmd("ZADD");
        touched.arg(key("touched"));
        for i in start..end {
            waiting.arg(i + 1).arg(token(i));
            let at = if later_from > 0 && i >= later_from {
                now_ms + 3_600_000
            } else {
                now_ms
            };
            touched.arg(at).arg(format!("{}:{}", i + 1, token(i)));
        }
        let _: () = redis::pipe()
            .add_command(waiting)
            .ignore()
            .add_command(touched)
            .ignore()
            .query(&mut c)
            .unwrap();
    }
    let _: () = redis::cmd("SET")
        .arg(key("seq"))
        .arg(n)
        .query(&mut c)
        .unwrap();
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6
}

async fn status_at(server: &RedisServer, room: &WaitingRoom, n: u64) {
    seed(server, n);
    // One tick first, so that status computes an ETA as it will in use.
    let _ = room.admit().await.unwrap();
    let (calls0, usec0) = evalsha(server);
    let mut took = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        let t = token(fastrand::u64(1_000..n.max(1_001)) % n);
        let start = Instant::now();
        std::hint::black_box(room.status(&t).await.unwrap());
        took.push(start.elapsed());
    }
    let (calls1, usec1) = evalsha(server);
    took.sort();
    println!(
        "status, {n:>9} waiting: p50 {:6.1} µs  p99 {:6.1} µs  (client round trip); Redis {:.1} µs a call",
        percentile(&took, 0.5),
        percentile(&took, 0.99),
        (usec1 - usec0) / (calls1 - calls0)
    );
}

#[tokio::main]
async fn main() {
    let server = RedisServer::start();
    let producer = Producer::connect(&server.url()).await.unwrap();
    let room =
        WaitingRoom::new(&producer, ROOM, RoomConfig::default().admit_per_tick(100)).unwrap();
    status_at(&server, &room, 1_000).await;
    status_at(&server, &room, 1_000_000).await;

    seed(&server, 0);
    let start = Instant::now();
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let room = room.clone();
            tokio::spawn(async move {
                for _ in 0..400 {
                    room.enter().await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    println!(
        "enter: {:.0} enters/s (20,000 from 50 tasks)",
        20_000.0 / start.elapsed().as_secs_f64()
    );

    seed(&server, 1_000_000);
    let big = WaitingRoom::new(
        &producer,
        ROOM,
        RoomConfig::default().admit_per_tick(10_000),
    )
    .unwrap();
    let (_, usec0) = evalsha(&server);
    let start = Instant::now();
    let admitted = big.admit().await.unwrap();
    let wall = start.elapsed();
    let (_, usec1) = evalsha(&server);
    println!(
        "admit: one tick of {admitted} of 1,000,000 waiting: Redis {:.1} ms ({:.1} ms with the round trip)",
        (usec1 - usec0) / 1e3,
        wall.as_secs_f64() * 1e3
    );

    // The steady state at 10,000 a tick: a tick that also ends a previous tick's 10,000
    // admissions and drops their touch records; then one that, besides, expires waiting
    // tokens left untouched (all 1,000,000 seeded records are past waiting_ttl by then).
    for (case, later_from) in [("steady", 10_000), ("expiring", 0)] {
        tick_after_tick(&server, &producer, case, later_from).await;
    }
}

async fn tick_after_tick(server: &RedisServer, producer: &Producer, case: &str, later_from: u64) {
    seed_touched(server, 1_000_000, later_from);
    let churn = WaitingRoom::new(
        producer,
        ROOM,
        RoomConfig::default()
            .admit_per_tick(10_000)
            .active_ttl(Duration::from_secs(1))
            .waiting_ttl(Duration::from_secs(1)),
    )
    .unwrap();
    let lease = churn.lease(Duration::from_secs(30)).unwrap();
    let leadership = lease.try_acquire().await.unwrap().expect("the only ticker");
    churn.admit_as(&leadership).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (_, usec0) = evalsha(server);
    let report = churn.admit_as(&leadership).await.unwrap().expect("current");
    let (_, usec1) = evalsha(server);
    println!(
        "admit ({case}): a tick that admits {}, ends {} admissions and expires {} waiting: Redis {:.1} ms",
        report.admitted,
        report.expired_active,
        report.expired_waiting,
        (usec1 - usec0) / 1e3
    );
}
