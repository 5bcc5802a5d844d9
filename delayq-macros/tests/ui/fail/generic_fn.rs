use delayq_runtime::delay_listener;

#[delay_listener(topic = "t")]
async fn handler<T: serde::de::DeserializeOwned>(_: T) {}

fn main() {}
