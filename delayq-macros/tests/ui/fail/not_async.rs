use delayq_runtime::delay_listener;

#[delay_listener(topic = "t")]
fn handler(_: u32) {}

fn main() {}
