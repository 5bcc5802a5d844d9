//! delayq against the official BullMQ Rust crate, on one redis-server this program starts (no
//! persistence, a free loopback port), in one run: each round runs every workload once with
//! delayq and once with BullMQ, one after the other, so that the machine's drift hits both.
//! Prints medians (min – max) and the ratio delayq / BullMQ.
//!
//! Workloads (payload: the same 92-byte JSON object for both):
//! - drain: 50,000 messages already due when the consumer starts, handled at concurrency 50
//!   and 200; messages/s from the first handler start to the last.
//! - keep_up: 50,000 messages due uniformly over 5 s, sent in batches of 1,000 while the
//!   consumer (concurrency 50) runs; lateness (handler start minus due time) p50 and p99.
//! - precision: 20 messages sent one after another, each with a 1 s delay; lateness p50, max.
//!
//! BullMQ's jobs are removed on completion (`remove_on_complete`), as delayq deletes an acked
//! message. Its due time is the job's timestamp plus its delay, both on this machine's clock.
//!
//! With `--node`, each round also runs BullMQ on Node (`node/bench.mjs`, after `npm install
//! --prefix benchmarks/peers/node`) on the drain and keep-up workloads, on the same server, and
//! the table gains its column and ratio.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bullmq::options::RedisConnectionOptions;
use bullmq::types::RemoveOnFinish;
use bullmq::{BulkJob, Job, Queue, QueueOptions, Worker, WorkerOptions};
use delayq_runtime::{delay_listener, Message, Producer, Runtime};
use serde::{Deserialize, Serialize};

/// The payload both send: an order-timeout message of 92 bytes as JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Payload {
    order_id: u64,
    customer: String,
    note: String,
}

fn payload(i: u64) -> Payload {
    Payload {
        order_id: i,
        customer: format!("customer-{:08}", i % 100_000),
        note: "close the order if it is still unpaid".to_string(),
    }
}

/// Handler starts: (lateness µs against the due time, when).
static STARTS: Mutex<Vec<(i64, Instant)>> = Mutex::new(Vec::new());

fn record(due_unix_ms: u64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64;
    STARTS
        .lock()
        .unwrap()
        .push((now - due_unix_ms as i64 * 1000, Instant::now()));
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

#[delay_listener(topic = "peer.c50", concurrency = 50)]
async fn peer_c50(msg: Message<Payload>) {
    std::hint::black_box(msg.payload().order_id);
    record(unix_ms(msg.due_at()));
}

#[delay_listener(topic = "peer.c200", concurrency = 200)]
async fn peer_c200(msg: Message<Payload>) {
    std::hint::black_box(msg.payload().order_id);
    record(unix_ms(msg.due_at()));
}

/// A redis-server of this program's, killed when dropped.
struct Server {
    child: Child,
    port: u16,
    _dir: TempDir,
}

/// A directory removed when dropped.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Server {
    fn start() -> Server {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!("delayq-peers-{port}"));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (Debian: apt-get install -y redis-server)");
        let server = Server {
            child,
            port,
            _dir: TempDir(dir),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.cmd(&["PING"]).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// One command over a fresh blocking connection (setup only).
    fn cmd(&self, args: &[&str]) -> std::io::Result<String> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, self.port))?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req += &format!("${}\r\n{a}\r\n", a.len());
        }
        s.write_all(req.as_bytes())?;
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf[..n]).to_string())
    }

    fn flush(&self) {
        self.cmd(&["FLUSHALL"]).expect("FLUSHALL");
        STARTS.lock().unwrap().clear();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_handled(n: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    while STARTS.lock().unwrap().len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} handled in {limit:?}",
            STARTS.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

type Metrics = BTreeMap<&'static str, f64>;

fn percentile(sorted: &[i64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize] as f64
}

/// Throughput and lateness of what was handled.
fn summarize(n: usize) -> Metrics {
    let starts = std::mem::take(&mut *STARTS.lock().unwrap());
    assert_eq!(starts.len(), n, "each message handled once");
    let first = starts.iter().map(|s| s.1).min().unwrap();
    let last = starts.iter().map(|s| s.1).max().unwrap();
    let mut late: Vec<i64> = starts.iter().map(|s| s.0).collect();
    late.sort_unstable();
    let mut m = Metrics::new();
    m.insert(
        "msgs_per_s",
        n as f64 / last.duration_since(first).as_secs_f64(),
    );
    m.insert("lateness_p50_ms", percentile(&late, 0.5) / 1000.0);
    m.insert("lateness_p99_ms", percentile(&late, 0.99) / 1000.0);
    m.insert("lateness_max_ms", *late.last().unwrap() as f64 / 1000.0);
    m
}

/// Which system a run drives.
#[derive(Clone, Copy, PartialEq)]
enum Peer {
    Delayq,
    Bullmq,
}

/// A peer's sending side on one queue, connected once for a workload.
enum Sender {
    Delayq(Producer, &'static str),
    Bullmq(Box<Queue>),
}

impl Sender {
    async fn open(server: &Server, peer: Peer, queue: &'static str) -> Sender {
        match peer {
            Peer::Delayq => Sender::Delayq(Producer::connect(&server.url()).await.unwrap(), queue),
            Peer::Bullmq => Sender::Bullmq(Box::new(bull_queue(server, queue).await)),
        }
    }

    /// Sends `items` (payload number, delay) with the peer's batch call.
    async fn send(&self, items: &[(u64, Duration)]) {
        for chunk in items.chunks(5_000) {
            match self {
                Sender::Delayq(p, queue) => {
                    let batch: Vec<_> = chunk.iter().map(|(i, d)| (payload(*i), *d)).collect();
                    p.send_batch(queue, batch).await.unwrap();
                }
                Sender::Bullmq(q) => {
                    let jobs: Vec<_> = chunk
                        .iter()
                        .map(|(i, d)| {
                            let job = BulkJob::new("j", payload(*i));
                            // A job due now goes to BullMQ's wait list, not its delayed set.
                            if d.is_zero() {
                                job
                            } else {
                                job.delay(*d)
                            }
                        })
                        .collect();
                    q.add_bulk(jobs).await.unwrap();
                }
            }
        }
    }

    async fn close(self) {
        if let Sender::Bullmq(q) = self {
            q.close().await;
        }
    }
}

fn connection(server: &Server) -> RedisConnectionOptions {
    RedisConnectionOptions {
        url: server.url(),
        ..RedisConnectionOptions::default()
    }
}

async fn bull_queue(server: &Server, name: &str) -> Queue {
    let opts = QueueOptions {
        connection: connection(server),
        ..QueueOptions::default()
    };
    Queue::with_options(name, opts).await.unwrap()
}

/// A running consumer of `queue` at `concurrency`.
enum Consumer {
    Delayq(delayq_runtime::RuntimeHandle),
    Bullmq(Box<Worker>),
}

async fn consume(server: &Server, peer: Peer, queue: &str, concurrency: usize) -> Consumer {
    match peer {
        Peer::Delayq => Consumer::Delayq(
            Runtime::builder()
                .redis_url(server.url())
                .topics([queue])
                .spawn()
                .await
                .unwrap(),
        ),
        Peer::Bullmq => {
            let opts = WorkerOptions {
                connection: connection(server),
                concurrency,
                remove_on_complete: Some(RemoveOnFinish::Bool(true)),
                ..WorkerOptions::default()
            };
            let worker = Worker::with_options(
                queue,
                |job: Job, _token| async move {
                    std::hint::black_box(job.data());
                    record(job.timestamp() + job.delay());
                    Ok(serde_json::Value::Null)
                },
                opts,
            )
            .await
            .unwrap();
            Consumer::Bullmq(Box::new(worker))
        }
    }
}

impl Consumer {
    async fn stop(self) {
        match self {
            Consumer::Delayq(rt) => rt.shutdown().await.unwrap(),
            Consumer::Bullmq(w) => w.close(10_000).await.unwrap(),
        }
    }
}

fn topic(concurrency: usize) -> &'static str {
    if concurrency == 50 {
        "peer.c50"
    } else {
        "peer.c200"
    }
}

async fn drain(server: &Server, peer: Peer, concurrency: usize) -> Metrics {
    server.flush();
    let q = topic(concurrency);
    let sender = Sender::open(server, peer, q).await;
    let items: Vec<_> = (0..50_000).map(|i| (i, Duration::ZERO)).collect();
    sender.send(&items).await;
    sender.close().await;
    let consumer = consume(server, peer, q, concurrency).await;
    wait_handled(50_000, Duration::from_secs(600)).await;
    consumer.stop().await;
    summarize(50_000)
}

async fn keep_up(server: &Server, peer: Peer) -> Metrics {
    server.flush();
    let q = topic(50);
    let consumer = consume(server, peer, q, 50).await;
    let sender = Sender::open(server, peer, q).await;
    let mut rng = fastrand::Rng::with_seed(7);
    let items: Vec<_> = (0..50_000)
        .map(|i| (i, Duration::from_millis(rng.u64(0..=5_000))))
        .collect();
    for chunk in items.chunks(1_000) {
        sender.send(chunk).await;
    }
    sender.close().await;
    wait_handled(50_000, Duration::from_secs(600)).await;
    consumer.stop().await;
    summarize(50_000)
}

async fn precision(server: &Server, peer: Peer) -> Metrics {
    server.flush();
    let q = topic(50);
    let consumer = consume(server, peer, q, 50).await;
    let sender = Sender::open(server, peer, q).await;
    for i in 0..20 {
        sender.send(&[(i, Duration::from_secs(1))]).await;
        wait_handled(i as usize + 1, Duration::from_secs(30)).await;
    }
    sender.close().await;
    consumer.stop().await;
    summarize(20)
}

/// BullMQ on Node on `workload` (`drain50`, `drain200` or `keep_up`): `node/bench.mjs` against
/// this server, its one line of JSON read as the metrics the Rust side computes.
fn node(server: &Server, workload: &str) -> Metrics {
    server.flush();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/node/bench.mjs");
    let out = Command::new("node")
        .arg(script)
        .arg(workload)
        .arg(server.port.to_string())
        .stderr(Stdio::inherit())
        .output()
        .expect("node on PATH, and `npm install --prefix benchmarks/peers/node` run once");
    assert!(
        out.status.success(),
        "node bench.mjs {workload}: {}",
        out.status
    );
    let got: BTreeMap<String, f64> =
        serde_json::from_slice(&out.stdout).expect("bench.mjs prints its metrics as JSON");
    let mut m = Metrics::new();
    for key in [
        "msgs_per_s",
        "lateness_p50_ms",
        "lateness_p99_ms",
        "lateness_max_ms",
    ] {
        m.insert(key, got[key]);
    }
    m
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut runs = 3;
    let with_node = args.iter().any(|a| a == "--node");
    args.retain(|a| a != "--node");
    if let Some(i) = args.iter().position(|a| a == "--runs") {
        runs = args[i + 1].parse().expect("--runs N");
        args.drain(i..i + 2);
    }
    if args.is_empty() {
        args = vec!["drain".into(), "keep_up".into(), "precision".into()];
    }
    let server = Server::start();
    println!(
        "delayq against bullmq-official 1.4.4, one redis-server ({}), {runs} interleaved rounds; median (min – max)\n",
        server.cmd(&["INFO", "server"]).unwrap().lines().find(|l| l.starts_with("redis_version")).unwrap_or("?").trim()
    );
    // (workload, metric shown, higher is better)
    let mut cases: Vec<(String, &str, bool)> = Vec::new();
    for w in &args {
        match w.as_str() {
            "drain" => {
                cases.push(("drain c50".into(), "msgs_per_s", true));
                cases.push(("drain c200".into(), "msgs_per_s", true));
            }
            "keep_up" => {
                cases.push(("keep_up c50".into(), "lateness_p50_ms", false));
                cases.push(("keep_up c50".into(), "lateness_p99_ms", false));
            }
            "precision" => {
                cases.push(("precision".into(), "lateness_p50_ms", false));
                cases.push(("precision".into(), "lateness_max_ms", false));
            }
            other => panic!("unknown workload {other:?}: drain, keep_up or precision"),
        }
    }
    let mut results: BTreeMap<(String, u8), Vec<Metrics>> = BTreeMap::new();
    for round in 0..runs {
        for w in &args {
            for (peer, tag) in [(Peer::Delayq, 0u8), (Peer::Bullmq, 1u8)] {
                let got: Vec<(String, Metrics)> = match w.as_str() {
                    "drain" => vec![
                        ("drain c50".into(), drain(&server, peer, 50).await),
                        ("drain c200".into(), drain(&server, peer, 200).await),
                    ],
                    "keep_up" => vec![("keep_up c50".into(), keep_up(&server, peer).await)],
                    _ => vec![("precision".into(), precision(&server, peer).await)],
                };
                for (name, m) in got {
                    eprintln!(
                        "round {round} {name} {}: {m:?}",
                        ["delayq", "bullmq"][tag as usize]
                    );
                    results.entry((name, tag)).or_default().push(m);
                }
            }
            let on_node: &[(&str, &str)] = match w.as_str() {
                "drain" if with_node => &[("drain c50", "drain50"), ("drain c200", "drain200")],
                "keep_up" if with_node => &[("keep_up c50", "keep_up")],
                _ => &[],
            };
            for (name, workload) in on_node {
                let m = node(&server, workload);
                eprintln!("round {round} {name} bullmq-node: {m:?}");
                results.entry((name.to_string(), 2)).or_default().push(m);
            }
        }
    }
    println!(
        "{:<14} {:<16} {:>26} {:>26} {:>8}{}",
        "workload",
        "metric",
        "delayq",
        "bullmq-official",
        "ratio",
        if with_node {
            format!(" {:>26} {:>8}", "bullmq (node)", "ratio")
        } else {
            String::new()
        }
    );
    for (name, metric, higher) in cases {
        let cell = |tag: u8| -> (f64, String) {
            let Some(runs) = results.get(&(name.clone(), tag)) else {
                return (f64::NAN, "-".into());
            };
            let mut v: Vec<f64> = runs.iter().map(|m| m[metric]).collect();
            let (lo, hi) = (
                v.iter().cloned().fold(f64::INFINITY, f64::min),
                v.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            );
            let med = median(&mut v);
            (med, format!("{med:.1} ({lo:.1} – {hi:.1})"))
        };
        let (ours, ours_s) = cell(0);
        let (theirs, theirs_s) = cell(1);
        let ratio = |theirs: f64| if higher { ours / theirs } else { theirs / ours };
        let node = if with_node {
            let (node, node_s) = cell(2);
            format!(" {node_s:>26} {:>7.1}×", ratio(node))
        } else {
            String::new()
        };
        println!(
            "{name:<14} {metric:<16} {ours_s:>26} {theirs_s:>26} {:>7.1}×{node}",
            ratio(theirs)
        );
    }
    println!("\nratio: how many times better delayq is (throughput ÷, lateness the other way)");
}
