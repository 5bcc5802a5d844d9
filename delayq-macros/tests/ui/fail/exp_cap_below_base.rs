use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", backoff = "exp(10m, 1s)")]
async fn handler(_: u32) {}

fn main() {}
