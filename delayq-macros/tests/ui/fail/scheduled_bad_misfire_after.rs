use delayq_runtime::{scheduled, Tick};

#[scheduled(name = "report", every = "5m", misfire_after = "50ms")]
async fn report(tick: Tick) {
    let _ = tick;
}

fn main() {}
