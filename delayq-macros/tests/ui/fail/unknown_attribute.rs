use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", retries = 3)]
async fn handler(_: u32) {}

fn main() {}
