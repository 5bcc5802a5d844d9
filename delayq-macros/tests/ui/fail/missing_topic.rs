use delayq_runtime::delay_listener;

#[delay_listener(concurrency = 4)]
async fn handler(_: u32) {}

fn main() {}
