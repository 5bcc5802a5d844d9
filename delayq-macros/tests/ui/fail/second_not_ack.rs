use delayq_runtime::delay_listener;

#[delay_listener(topic = "t")]
async fn handler(_msg: u32, _ack: String) {}

fn main() {}
