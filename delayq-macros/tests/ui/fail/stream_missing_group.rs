use delayq_runtime::stream_listener;

#[stream_listener(stream = "orders.v1")]
async fn handler(n: u64) {
    let _ = n;
}

fn main() {}
