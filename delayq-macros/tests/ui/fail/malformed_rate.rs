use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", rate = "100/day")]
async fn handler(_: u32) {}

fn main() {}
