//! A stream consumer or leader contender for tests that need real processes (killed with
//! SIGKILL, several at once). `DELAYQ_TEST_ROLE` picks what runs:
//!
//! - `stream`: the stream listener of `proc.stream`, group `g` (concurrency 100, min_idle
//!   2 s). Each handled entry appends `<payload> <deliveries> <pid>` (a `LedgerLine`) to
//!   `DELAYQ_TEST_LEDGER`, after sleeping `DELAYQ_TEST_HANDLER_MS` milliseconds.
//! - `room`: ticks the waiting room `proc.room` (`delayq_dev::PROC_ROOM`: 5 a tick, every
//!   100 ms).
//! - `leader`: the leader task `proc.leader` (every 50 ms, ttl 1 s). Each run appends a
//!   `LeaderTick` (token, start and end in µs, pid), after sleeping the same.
//!
//! - `schedule-last`, `schedule-none`, `schedule-all`: the `#[scheduled]` fn
//!   `proc.tick.<policy>` (every 1 s, ack_timeout 2 s, catch_up `<policy>`). Each run appends
//!   a `ScheduleTick`.
//!
//! It runs until SIGINT or SIGTERM, then shuts down gracefully.

use delayq_runtime::{
    leader_task, scheduled, stream_listener, Leadership, Runtime, StreamMessage, Tick,
};

#[stream_listener(
    stream = "proc.stream",
    group = "g",
    concurrency = 100,
    min_idle = "2s"
)]
async fn stream_work(msg: StreamMessage<u64>) -> Result<(), String> {
    tokio::time::sleep(delayq_dev::handler_delay()).await;
    delayq_dev::append_to_ledger(
        &delayq_dev::LedgerLine {
            payload: *msg.payload(),
            attempt: msg.deliveries(),
            pid: std::process::id(),
            at_us: delayq_dev::epoch_us(),
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
    tokio::time::sleep(delayq_dev::handler_delay()).await;
    delayq_dev::append_to_ledger(
        &delayq_dev::LeaderTick {
            token: leader.token(),
            start_us,
            end_us: now_us(),
            pid: std::process::id(),
        }
        .format(),
    )
}

fn record_tick(tick: &Tick) -> Result<(), String> {
    let ms = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    };
    delayq_dev::append_to_ledger(
        &delayq_dev::ScheduleTick {
            scheduled_ms: ms(tick.scheduled_at()),
            missed: tick.missed(),
            attempt: tick.attempt(),
            ran_ms: ms(std::time::SystemTime::now()),
            pid: std::process::id(),
        }
        .format(),
    )
}

// A tick more than a second late is missed (the tests' outages are seconds long).
#[scheduled(
    name = "proc.tick.last",
    every = "1s",
    ack_timeout = "2s",
    misfire_after = "1s"
)]
async fn tick_last(tick: Tick) -> Result<(), String> {
    record_tick(&tick)
}

#[scheduled(
    name = "proc.tick.none",
    every = "1s",
    ack_timeout = "2s",
    catch_up = "none",
    misfire_after = "1s"
)]
async fn tick_none(tick: Tick) -> Result<(), String> {
    record_tick(&tick)
}

#[scheduled(
    name = "proc.tick.all",
    every = "1s",
    ack_timeout = "2s",
    catch_up = "all",
    misfire_after = "1s"
)]
async fn tick_all(tick: Tick) -> Result<(), String> {
    record_tick(&tick)
}

#[tokio::main]
async fn main() {
    delayq_dev::init_process_tracing();
    let builder = match std::env::var("DELAYQ_TEST_ROLE").as_deref() {
        Ok("leader") => Runtime::builder().leader_tasks(["proc.leader"]),
        Ok(role @ ("schedule-last" | "schedule-none" | "schedule-all")) => {
            Runtime::builder().schedules([format!("proc.tick.{}", &role["schedule-".len()..])])
        }
        // The room only: an empty selection of leader tasks selects no listener either.
        Ok("room") => Runtime::builder()
            .leader_tasks(Vec::<String>::new())
            .waiting_room("proc.room", delayq_dev::PROC_ROOM),
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
