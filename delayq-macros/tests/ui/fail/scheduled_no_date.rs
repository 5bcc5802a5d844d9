use delayq_runtime::{scheduled, Tick};

#[scheduled(name = "report", cron = "0 0 30 2 *")]
async fn report(tick: Tick) {
    let _ = tick;
}

fn main() {}
