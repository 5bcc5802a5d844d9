use delayq_runtime::{scheduled, Tick};

#[scheduled(name = "report", tz = "UTC")]
async fn report(tick: Tick) {
    let _ = tick;
}

fn main() {}
