use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", concurrency = 0)]
async fn handler(_: u32) {}

fn main() {}
