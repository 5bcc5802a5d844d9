use delayq_runtime::scheduled;

#[scheduled(name = "report", every = "5m")]
async fn report(tick: u64) {
    let _ = tick;
}

fn main() {}
