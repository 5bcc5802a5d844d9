use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", ack_timeout = "30 seconds")]
async fn handler(_: u32) {}

fn main() {}
