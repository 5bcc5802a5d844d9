//! Stream listeners' benchmarks. Starts its own redis-server (no persistence), runs each
//! workload `--runs` times (default 3) and prints medians with min–max.
//!
//!     cargo bench --bench streams                   # drain and idle
//!     cargo bench --bench streams -- drain --runs 5
//!     cargo bench --bench streams -- drain --only c200    # rows whose name holds "c200"
//!
//! - drain: 100,000 entries (≈ 100-byte JSON payloads) already in the stream, consumed and
//!   acked by a `#[stream_listener]` at concurrency 50 and 200, next to the baseline: a plain
//!   loop of `XREADGROUP COUNT 200` and one `XACK` of the ids it read, decoding each payload,
//!   and the same loop with `COUNT 50` (never more than 50 entries in hand, as at c50).
//!   Entries/s (until the last ack) and the Redis µs per entry (XREADGROUP, XACK and any
//!   script calls; `BENCH_DETAIL=1` prints every command's calls and µs).
//! - idle: two stream listeners with default settings, 90 s; Redis commands per second per
//!   stream (commands inside scripts count too).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use delayq_dev::{payload, pending_entries, Payload, RedisServer};
use delayq_runtime::{stream_listener, Runtime, StreamMessage};

const ENTRIES: u64 = 100_000;
const GROUP: &str = "g";

static HANDLED: AtomicU64 = AtomicU64::new(0);

#[stream_listener(stream = "bench.s50", group = "g", concurrency = 50)]
async fn s50(msg: StreamMessage<Payload>) {
    std::hint::black_box(msg.payload().order_id);
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

#[stream_listener(stream = "bench.s200", group = "g", concurrency = 200)]
async fn s200(msg: StreamMessage<Payload>) {
    std::hint::black_box(msg.payload().order_id);
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

#[stream_listener(stream = "bench.idle.0", group = "g")]
async fn idle0(_: u64) {}

#[stream_listener(stream = "bench.idle.1", group = "g")]
async fn idle1(_: u64) {}

/// `cmdstat_<name>` calls and usec.
fn command_stats(server: &RedisServer) -> BTreeMap<String, (f64, f64)> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |key: &str| -> f64 {
                rest.split(',')
                    .find_map(|kv| kv.strip_prefix(key))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0)
            };
            Some((name.to_string(), (field("calls="), field("usec="))))
        })
        .collect()
}

fn usec_of(stats: &BTreeMap<String, (f64, f64)>, commands: &[&str]) -> f64 {
    commands
        .iter()
        .map(|c| stats.get(*c).map_or(0.0, |s| s.1))
        .sum()
}

/// Flushes, creates the group from the start, and adds the entries.
fn fill(server: &RedisServer, stream: &str) {
    let mut c = server.connection();
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query(&mut c)
        .unwrap();
    for start in (0..ENTRIES).step_by(5_000) {
        let mut pipe = redis::pipe();
        for i in start..(start + 5_000).min(ENTRIES) {
            pipe.cmd("XADD")
                .arg(stream)
                .arg("*")
                .arg("payload")
                .arg(serde_json::to_vec(&payload(i)).unwrap())
                .ignore();
        }
        let _: () = pipe.query(&mut c).unwrap();
    }
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
}

/// (entries/s, Redis µs per entry) for a delayq listener on `stream`.
async fn drain_delayq(server: &RedisServer, stream: &str) -> (f64, f64) {
    fill(server, stream);
    HANDLED.store(0, Ordering::SeqCst);
    let started = Instant::now();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .streams([stream])
        .spawn()
        .await
        .expect("spawn");
    while HANDLED.load(Ordering::Relaxed) < ENTRIES || pending_entries(server, stream, GROUP) > 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let wall = started.elapsed().as_secs_f64();
    let stats = command_stats(server);
    rt.shutdown().await.expect("shutdown");
    if std::env::var_os("BENCH_DETAIL").is_some() {
        for (name, (calls, usec)) in &stats {
            println!("    {stream} {name}: {calls} calls, {usec} µs");
        }
    }
    let usec = usec_of(&stats, &["xreadgroup", "xack", "evalsha"]);
    (ENTRIES as f64 / wall, usec / ENTRIES as f64)
}

/// The same with the plain loop, reading `count` entries at a time.
async fn drain_baseline(server: &RedisServer, stream: &str, count: usize) -> (f64, f64) {
    fill(server, stream);
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let started = Instant::now();
    let mut done = 0u64;
    while done < ENTRIES {
        let reply: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg("baseline")
            .arg("COUNT")
            .arg(count)
            .arg("BLOCK")
            .arg(1000)
            .arg("STREAMS")
            .arg(stream)
            .arg(">")
            .query_async(&mut c)
            .await
            .unwrap();
        let mut ids = Vec::new();
        for key in reply.keys {
            for entry in key.ids {
                if let Some(redis::Value::BulkString(b)) = entry.map.get("payload") {
                    let p: Payload = serde_json::from_slice(b).unwrap();
                    std::hint::black_box(p.order_id);
                }
                ids.push(entry.id);
            }
        }
        if ids.is_empty() {
            continue;
        }
        let _: u64 = redis::cmd("XACK")
            .arg(stream)
            .arg(GROUP)
            .arg(&ids)
            .query_async(&mut c)
            .await
            .unwrap();
        done += ids.len() as u64;
    }
    let wall = started.elapsed().as_secs_f64();
    let stats = command_stats(server);
    let usec = usec_of(&stats, &["xreadgroup", "xack"]);
    (ENTRIES as f64 / wall, usec / ENTRIES as f64)
}

/// Commands per second per stream with two idle listeners.
async fn idle(server: &RedisServer) -> f64 {
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut server.connection())
        .unwrap();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .streams(["bench.idle.0", "bench.idle.1"])
        .spawn()
        .await
        .expect("spawn");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let total = |s: &RedisServer| -> f64 {
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .query(&mut s.connection())
            .unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("total_commands_processed:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    };
    let before = total(server);
    let secs = 90.0;
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    // The first INFO is counted in the second reading.
    let caused = total(server) - before - 1.0;
    rt.shutdown().await.expect("shutdown");
    caused / secs / 2.0
}

fn summary(values: &mut [f64]) -> String {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    format!(
        "{:>10.1} (min {:.1}, max {:.1})",
        values[values.len() / 2],
        values[0],
        values[values.len() - 1]
    )
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut runs = 3;
    let mut only: Option<String> = None;
    let mut workloads = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--runs" => {
                runs = args
                    .get(i + 1)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| {
                        eprintln!("--runs takes a number");
                        std::process::exit(2)
                    });
                i += 1;
            }
            "--only" => {
                only = args.get(i + 1).cloned();
                i += 1;
            }
            w @ ("drain" | "idle") => workloads.push(w.to_string()),
            other => {
                eprintln!("unknown argument {other:?}; use drain, idle, --runs N, --only ROW");
                std::process::exit(2)
            }
        }
        i += 1;
    }
    if workloads.is_empty() {
        workloads = vec!["drain".into(), "idle".into()];
    }
    let server = RedisServer::start();
    for w in &workloads {
        if w == "drain" {
            println!(
                "drain: {ENTRIES} entries already in the stream, {runs} runs (median, min, max)"
            );
            let mut rows: Vec<(&str, Vec<f64>, Vec<f64>)> = Vec::new();
            for name in [
                "baseline COUNT 200",
                "baseline COUNT 50",
                "delayq c50",
                "delayq c200",
            ] {
                if only.as_deref().is_some_and(|o| !name.contains(o)) {
                    continue;
                }
                rows.push((name, Vec::new(), Vec::new()));
            }
            // Interleaved, so that machine drift touches each alike.
            for _ in 0..runs {
                for row in rows.iter_mut() {
                    let (rate, usec) = match row.0 {
                        "delayq c50" => drain_delayq(&server, "bench.s50").await,
                        "delayq c200" => drain_delayq(&server, "bench.s200").await,
                        "baseline COUNT 50" => drain_baseline(&server, "bench.base", 50).await,
                        _ => drain_baseline(&server, "bench.base", 200).await,
                    };
                    row.1.push(rate);
                    row.2.push(usec);
                }
            }
            // Each round's delayq rate over the same round's baseline: steadier than a ratio
            // of medians when the machine's speed drifts between rounds.
            let rates_of = |name: &str| rows.iter().find(|r| r.0 == name).map(|r| r.1.clone());
            let mut ratios = Vec::new();
            for (delayq, baseline) in [
                ("delayq c200", "baseline COUNT 200"),
                ("delayq c50", "baseline COUNT 50"),
                ("delayq c50", "baseline COUNT 200"),
            ] {
                if let (Some(d), Some(b)) = (rates_of(delayq), rates_of(baseline)) {
                    let mut r: Vec<f64> = d.iter().zip(&b).map(|(d, b)| 100.0 * d / b).collect();
                    ratios.push(format!("  {delayq} / {baseline}: {} %", summary(&mut r)));
                }
            }
            for (name, rates, usecs) in rows.iter_mut() {
                println!(
                    "  {name:<26} entries/s {}   Redis µs/entry {}",
                    summary(rates),
                    summary(usecs)
                );
            }
            if !ratios.is_empty() {
                println!("  per round:");
                for line in ratios {
                    println!("  {line}");
                }
            }
        } else {
            let per_stream = idle(&server).await;
            println!("idle: {per_stream:.3} Redis commands/s per idle stream (2 streams, 90 s)");
        }
    }
}
