use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", backoff = "linear(1s)")]
async fn handler(_: u32) {}

fn main() {}
