use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", concurrency = 4, concurrency = 8)]
async fn handler(_: u32) {}

fn main() {}
