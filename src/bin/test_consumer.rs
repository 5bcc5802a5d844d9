//! A consumer process for tests that need a real process: it runs `delayq_runtime::start()`
//! (environment config, signal handling) with listeners that record what they handle.
//!
//! Each handled message appends the line `<payload> <attempt> <pid>` to the file named by
//! `DELAYQ_TEST_LEDGER`, after sleeping `DELAYQ_TEST_HANDLER_MS` (default 0) milliseconds.
//! Listeners: `proc.work` (ack_timeout 5 s) and `proc.slow` (ack_timeout 1 s).

use std::io::Write;
use std::time::Duration;

use delayq_runtime::{delay_listener, Message};

fn handler_delay() -> Duration {
    let ms = std::env::var("DELAYQ_TEST_HANDLER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Duration::from_millis(ms)
}

async fn handle(msg: Message<u64>) -> Result<(), String> {
    tokio::time::sleep(handler_delay()).await;
    let path = std::env::var("DELAYQ_TEST_LEDGER").map_err(|_| "DELAYQ_TEST_LEDGER is not set")?;
    let mut ledger = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("open {path}: {e}"))?;
    let line = delayq_dev::LedgerLine {
        payload: *msg.payload(),
        attempt: msg.attempt(),
        pid: std::process::id(),
    }
    .format();
    // One write call per line: a process killed mid-way never leaves half a line.
    ledger.write_all(line.as_bytes()).map_err(|e| e.to_string())
}

#[delay_listener(topic = "proc.work", concurrency = 32, ack_timeout = "5s")]
async fn work(msg: Message<u64>) -> Result<(), String> {
    handle(msg).await
}

#[delay_listener(topic = "proc.slow", concurrency = 4, ack_timeout = "1s")]
async fn slow(msg: Message<u64>) -> Result<(), String> {
    handle(msg).await
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = delayq_runtime::start().await {
        eprintln!("delayq-test-consumer: {e}");
        std::process::exit(1);
    }
}
