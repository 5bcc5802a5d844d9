use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", dead_max = 0)]
async fn handler(_: u32) {}

fn main() {}
