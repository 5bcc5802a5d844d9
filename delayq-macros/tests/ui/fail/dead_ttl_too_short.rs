use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", dead_ttl = "10ms")]
async fn handler(_: u32) {}

fn main() {}
