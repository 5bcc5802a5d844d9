use delayq_runtime::delay_listener;

#[delay_listener(topic = "t")]
async fn handler() {}

fn main() {}
