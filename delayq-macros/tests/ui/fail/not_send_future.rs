use std::rc::Rc;

use delayq_runtime::delay_listener;

#[delay_listener(topic = "t")]
async fn handler(n: u32) {
    // An Rc held across an await makes the future !Send: it could not run on the runtime's
    // worker threads.
    let shared = Rc::new(n);
    tokio::task::yield_now().await;
    drop(shared);
}

fn main() {}
