use delayq_runtime::{scheduled, Tick};

#[scheduled(name = "report", cron = "0 9 * * *", every = "1h")]
async fn report(tick: Tick) {
    let _ = tick;
}

fn main() {}
