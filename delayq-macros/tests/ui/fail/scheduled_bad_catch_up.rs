use delayq_runtime::{scheduled, Tick};

#[scheduled(name = "report", every = "5m", catch_up = "some")]
async fn report(tick: Tick) {
    let _ = tick;
}

fn main() {}
