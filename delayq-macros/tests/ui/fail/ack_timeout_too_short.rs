use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", ack_timeout = "1ms")]
async fn handler(_: u32) {}

fn main() {}
