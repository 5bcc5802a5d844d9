//! Schedules' benchmarks. Starts its own redis-server (no persistence).
//!
//!     cargo bench --bench schedules
//!
//! - lateness: a `#[scheduled(every = "100ms")]` fn over 200 ticks; p50 / p99 / max of
//!   handler start minus the tick's time (both this machine's clock, which is Redis' here),
//!   and the Redis commands per tick, all of them (writing the tick, claiming, acking, the
//!   producer's polls), from `INFO commandstats`.
//! - idle: 100 dynamic schedules whose next tick is a year away, on a topic the runtime
//!   listens on; Redis commands a second over 30 s after start-up.
//! - processes: a `#[scheduled(every = "100ms")]` fn run by 1, 4 and 8 runtimes (spawned in
//!   this process, on one server and namespace, each with its own connections) over 200
//!   ticks; Redis commands per tick, all of them, by command (`INFO commandstats`), and how
//!   many ticks ran twice (none may).
//! - many: 100,000 dynamic schedules an hour away (written by hand, in pipelines) on a topic
//!   the runtime listens on, and one `every = "1s"` there: how long `spawn` takes, and how
//!   many of 15 ticks of the 1 s schedule run on time while another schedule is upserted once
//!   a second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use delayq_dev::RedisServer;
use delayq_runtime::{delay_listener, scheduled, Runtime, Schedule, Tick};

static LATE_US: Mutex<Vec<i64>> = Mutex::new(Vec::new());

#[scheduled(name = "bench.tick", every = "100ms")]
async fn tick(tick: Tick) {
    let late = match SystemTime::now().duration_since(tick.scheduled_at()) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    };
    LATE_US.lock().unwrap().push(late);
}

static PROC_TICKS: Mutex<Vec<u64>> = Mutex::new(Vec::new());
static PROC_RUNS: AtomicU64 = AtomicU64::new(0);

#[scheduled(name = "bench.procs", every = "100ms")]
async fn procs_tick(tick: Tick) {
    let at = tick
        .scheduled_at()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    PROC_TICKS.lock().unwrap().push(at);
    PROC_RUNS.fetch_add(1, Ordering::SeqCst);
}

#[delay_listener(topic = "bench.idle")]
async fn idle(_msg: u8) {}

/// The due times (ms) of the ticks of `bench.many`'s 1 s schedule (payload 1), and how late
/// each ran.
static PULSE: Mutex<Vec<(u64, i64)>> = Mutex::new(Vec::new());

#[delay_listener(topic = "bench.many")]
async fn many(msg: delayq_runtime::Message<u8>) {
    if *msg.payload() == 1 {
        let due = msg.due_at();
        let late = match SystemTime::now().duration_since(due) {
            Ok(d) => d.as_millis() as i64,
            Err(e) => -(e.duration().as_millis() as i64),
        };
        let due_ms = due
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        PULSE.lock().unwrap().push((due_ms, late));
    }
}

fn percentile(sorted: &[i64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1_000.0
}

/// The server's commands since its stats were reset, but the bench's own (`INFO`, `CONFIG`):
/// their total, and each by name.
fn commands(server: &RedisServer) -> (u64, Vec<(String, u64)>) {
    let mut by: Vec<(String, u64)> = server
        .command_calls()
        .into_iter()
        .filter(|(name, n)| *n > 0 && !name.starts_with("config") && name.as_str() != "info")
        .collect();
    by.sort();
    (by.iter().map(|(_, n)| n).sum(), by)
}

async fn lateness() {
    let server = RedisServer::start();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .schedules(["bench.tick"])
        .spawn()
        .await
        .unwrap();
    // Past start-up: the first ticks, then count from a clean slate.
    while LATE_US.lock().unwrap().len() < 5 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.reset_stats();
    LATE_US.lock().unwrap().clear();
    while LATE_US.lock().unwrap().len() < 200 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (total, by) = commands(&server);
    rt.shutdown().await.unwrap();
    let mut late = LATE_US.lock().unwrap().clone();
    late.truncate(200);
    late.sort_unstable();
    println!(
        "lateness over {} ticks of every 100ms: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, min {:.2} ms",
        late.len(),
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        percentile(&late, 1.0),
        percentile(&late, 0.0),
    );
    println!(
        "Redis commands per tick: {:.2} ({total} for 200 ticks: {by:?})",
        total as f64 / 200.0
    );
}

async fn idle_schedules() {
    let server = RedisServer::start();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["bench.idle"])
        .spawn()
        .await
        .unwrap();
    let p = rt.producer();
    for i in 0..100 {
        p.upsert_schedule(
            &format!("bench.idle.{i}"),
            Schedule::cron("0 0 1 1 *").unwrap(),
            "bench.idle",
            &1u8,
        )
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.reset_stats();
    let window = Duration::from_secs(30);
    tokio::time::sleep(window).await;
    let (total, by) = commands(&server);
    rt.shutdown().await.unwrap();
    println!(
        "idle, 100 schedules a year away: {total} Redis commands in {window:?} = {:.3}/s in all, {:.5}/s per schedule ({by:?})",
        total as f64 / window.as_secs_f64(),
        total as f64 / window.as_secs_f64() / 100.0
    );
}

/// Commands per tick of `bench.procs` run by `n` runtimes.
async fn processes(n: usize) {
    let server = RedisServer::start();
    let mut runtimes = Vec::new();
    for _ in 0..n {
        runtimes.push(
            Runtime::builder()
                .redis_url(server.url())
                .schedules(["bench.procs"])
                .spawn()
                .await
                .unwrap(),
        );
    }
    let runs = || PROC_RUNS.load(Ordering::SeqCst);
    let start = runs();
    while runs() < start + 10 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.reset_stats();
    PROC_TICKS.lock().unwrap().clear();
    let from = runs();
    while runs() < from + 200 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (total, mut by) = commands(&server);
    let ticks = runs() - from;
    for rt in runtimes {
        rt.shutdown().await.unwrap();
    }
    let mut times = PROC_TICKS.lock().unwrap().clone();
    let ran = times.len();
    times.sort_unstable();
    times.dedup();
    by.sort_by_key(|(_, calls)| std::cmp::Reverse(*calls));
    let by: Vec<String> = by
        .iter()
        .map(|(name, calls)| format!("{name} {:.1}", *calls as f64 / ticks as f64))
        .collect();
    println!(
        "{n} runtime(s): {:.1} Redis commands per tick over {ticks} ticks ({} ran twice); per tick: {}",
        total as f64 / ticks as f64,
        ran - times.len(),
        by.join(", ")
    );
}

/// Writes `n` schedule records an hour away (every hour) on `topic`, and their index
/// entries, in pipelines of 1,000.
fn idle_records(server: &RedisServer, topic: &str, n: usize) {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut server.connection()).unwrap();
    let next = (s * 1_000 + us / 1_000 + 3_600_000).to_string();
    let mut c = server.connection();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1_000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            let name = format!("bench.many.{i:06}");
            pipe.cmd("HSET")
                .arg(format!("delayq:{{{topic}}}:schedule:{name}"))
                .arg(&[
                    ("kind", "every"),
                    ("spec", "3600000"),
                    ("tz", "UTC"),
                    ("catch_up", "last"),
                    ("owner", "dynamic"),
                    ("topic", topic),
                    ("payload", "0"),
                    ("next", &next),
                    ("anchor", &next),
                    ("missed", "0"),
                ])
                .ignore();
            pipe.cmd("HSET")
                .arg("delayq:registry:{schedules}")
                .arg(&name)
                .arg(topic)
                .ignore();
        }
        let _: () = pipe.query(&mut c).unwrap();
    }
}

async fn many_schedules() {
    const N: usize = 100_000;
    let server = RedisServer::start();
    let p = delayq_dev::producer(&server).await;
    p.upsert_schedule(
        "bench.pulse",
        Schedule::every(Duration::from_secs(1)).unwrap(),
        "bench.many",
        &1u8,
    )
    .await
    .unwrap();
    let written = std::time::Instant::now();
    idle_records(&server, "bench.many", N);
    let written = written.elapsed();
    let started = std::time::Instant::now();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["bench.many"])
        .spawn()
        .await
        .unwrap();
    let spawn = started.elapsed();
    // Past the first ticks, then 15 s with an upsert each second.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now_ms = || {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    let from = now_ms();
    server.reset_stats();
    for i in 0..15u64 {
        p.upsert_schedule(
            "bench.changing",
            Schedule::every(Duration::from_millis(3_600_000 + i * 1_000)).unwrap(),
            "bench.many",
            &0u8,
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let to = from + 15_000;
    // The last tick's time may be just before `to`: let it run.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (total, by) = commands(&server);
    rt.shutdown().await.unwrap();
    let ticks: Vec<(u64, i64)> = PULSE
        .lock()
        .unwrap()
        .iter()
        .filter(|(due, _)| *due >= from && *due < to)
        .copied()
        .collect();
    let on_time = ticks.iter().filter(|(_, late)| *late < 1_000).count();
    let worst = ticks.iter().map(|(_, late)| *late).max().unwrap_or(0);
    println!(
        "many: {N} schedules written by hand in {written:?}; spawn took {spawn:?}; the 1 s schedule ran {} of 15 ticks ({on_time} less than 1 s late, worst {worst} ms) under an upsert a second",
        ticks.len()
    );
    let hgetall = by
        .iter()
        .find(|(n, _)| n == "hgetall")
        .map_or(0, |(_, n)| *n);
    println!(
        "many: {total} Redis commands over those 15 s ({hgetall} HGETALL: records read), {by:?}"
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let all = args.is_empty();
    if all || args.iter().any(|a| a == "lateness") {
        lateness().await;
    }
    if all || args.iter().any(|a| a == "idle") {
        idle_schedules().await;
    }
    if all || args.iter().any(|a| a == "processes") {
        for n in [1, 4, 8] {
            processes(n).await;
        }
    }
    if all || args.iter().any(|a| a == "many") {
        many_schedules().await;
    }
}
