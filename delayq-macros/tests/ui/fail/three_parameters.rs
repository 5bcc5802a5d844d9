use delayq_runtime::{delay_listener, Ack};

#[delay_listener(topic = "t")]
async fn handler(_: u32, _: Ack, _: u32) {}

fn main() {}
