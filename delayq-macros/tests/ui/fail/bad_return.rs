use delayq_runtime::delay_listener;

#[delay_listener(topic = "t")]
async fn handler(_: u32) -> u32 {
    7
}

fn main() {}
