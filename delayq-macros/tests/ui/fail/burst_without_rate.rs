use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", burst = 5)]
async fn handler(_: u32) {}

fn main() {}
