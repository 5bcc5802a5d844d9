use delayq_runtime::delay_listener;

#[delay_listener(topic = "t", rate = "10/s", burst = 11)]
async fn handler(_: u32) {}

fn main() {}
