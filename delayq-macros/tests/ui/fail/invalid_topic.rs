use delayq_runtime::delay_listener;

#[delay_listener(topic = "order timeout")]
async fn handler(_: u32) {}

fn main() {}
