use delayq_runtime::{stream_listener, Message};

// Message<T> is a delay listener's; a stream listener takes StreamMessage<T>.
#[stream_listener(stream = "orders.v1", group = "g")]
async fn handler(msg: Message<u64>) {
    let _ = msg;
}

fn main() {}
