use delayq_runtime::{scheduled, Tick};

#[scheduled(name = "report", cron = "0 9 * * MON-FRI", tz = "Europe/Atlantis")]
async fn report(tick: Tick) {
    let _ = tick;
}

fn main() {}
