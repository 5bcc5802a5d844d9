//! A stream consumer or leader contender for tests that need real processes (killed with
//! SIGKILL, several at once). `DELAYQ_TEST_ROLE` picks what runs:
//!
//! - `stream`: the stream listener of `proc.stream`, group `g` (concurrency 100, min_idle
//!   2 s). Each handled entry appends `<payload> <deliveries> <pid>` (a `LedgerLine`) to
//!   `DELAYQ_TEST_LEDGER`, after sleeping `DELAYQ_TEST_HANDLER_MS` milliseconds.
//! - `leader`: the leader task `proc.leader` (every 50 ms, ttl 1 s). Each run appends a
//!   `LeaderTick` (token, start and end in µs, pid), after sleeping the same.
//!
//! It runs until SIGINT or SIGTERM, then shuts down gracefully.

use std::io::Write;
use std::time::Duration;

use delayq_runtime::{leader_task, stream_listener, Leadership, Runtime, StreamMessage};

fn handler_delay() -> Duration {
    let ms = std::env::var("DELAYQ_TEST_HANDLER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Duration::from_millis(ms)
}

/// Appends `line` to the ledger in one write call: a process killed mid-way never leaves half
/// a line.
fn record(line: &str) -> Result<(), String> {
    let path = std::env::var("DELAYQ_TEST_LEDGER").map_err(|_| "DELAYQ_TEST_LEDGER is not set")?;
    let mut ledger = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("open {path}: {e}"))?;
    ledger.write_all(line.as_bytes()).map_err(|e| e.to_string())
}

#[stream_listener(
    stream = "proc.stream",
    group = "g",
    concurrency = 100,
    min_idle = "2s"
)]
async fn stream_work(msg: StreamMessage<u64>) -> Result<(), String> {
    tokio::time::sleep(handler_delay()).await;
    record(
        &delayq_dev::LedgerLine {
            payload: *msg.payload(),
            attempt: msg.deliveries(),
            pid: std::process::id(),
        }
        .format(),
    )
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

#[leader_task(name = "proc.leader", every = "50ms", ttl = "1s")]
async fn lead(leader: Leadership) -> Result<(), String> {
    let start_us = now_us();
    tokio::time::sleep(handler_delay()).await;
    record(
        &delayq_dev::LeaderTick {
            token: leader.token(),
            start_us,
            end_us: now_us(),
            pid: std::process::id(),
        }
        .format(),
    )
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let builder = match std::env::var("DELAYQ_TEST_ROLE").as_deref() {
        Ok("leader") => Runtime::builder().leader_tasks(["proc.leader"]),
        _ => Runtime::builder().streams(["proc.stream"]),
    };
    if let Err(e) = run(builder).await {
        eprintln!("delayq-test-streams: {e}");
        std::process::exit(1);
    }
}

/// What `start()` does, for the selected listener.
async fn run(builder: delayq_runtime::RuntimeBuilder) -> Result<(), delayq_runtime::Error> {
    let handle = builder.spawn().await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("listen for SIGTERM");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    handle.shutdown().await
}
