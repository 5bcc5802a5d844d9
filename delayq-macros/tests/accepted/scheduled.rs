use delayq_runtime::{scheduled, Ack, Tick};

#[scheduled(name = "daily-report", cron = "0 9 * * MON-FRI", tz = "Europe/Berlin")]
async fn daily_report(tick: Tick) -> Result<(), String> {
    let _ = (tick.name(), tick.scheduled_at(), tick.attempt(), tick.missed());
    Ok(())
}

#[scheduled(name = "sweep", every = "5m", catch_up = "none", max_attempts = 3, concurrency = 2)]
async fn sweep(tick: Tick, ack: Ack) {
    let _ = tick;
    ack.ack().await.unwrap();
}

#[scheduled(name = "hourly", cron = "@hourly", catch_up = "all", backoff = "fixed(5s)", misfire_after = "5m")]
async fn hourly(_tick: Tick) {}

#[scheduled(name = "with-seconds", cron = "30 0 12 1 JAN *", ack_timeout = "1m")]
async fn with_seconds(_tick: Tick) {}


