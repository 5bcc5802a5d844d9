use std::fmt;

use delayq_runtime::{delay_listener, Ack, Message};
use serde::Deserialize;

#[derive(Deserialize)]
struct Order {
    id: u64,
}

#[derive(Debug)]
struct MyError;

impl fmt::Display for MyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("my error")
    }
}

// An alias and a re-export of `Ack` still make a manual listener.
type Settle = Ack;
mod reexport {
    pub use delayq_runtime::Ack as Handle;
}

#[delay_listener(topic = "a")]
async fn payload_unit(order: Order) {
    let _ = order.id;
}

#[delay_listener(topic = "b", concurrency = 8, max_attempts = 5, ack_timeout = "500ms")]
async fn payload_result(_order: Order) -> Result<(), MyError> {
    Ok(())
}

#[delay_listener(
    topic = "c",
    backoff = "fixed(5s)",
    rate = "100/m",
    burst = 7,
    dead_max = 50,
    dead_ttl = "2h"
)]
async fn message_unit(msg: Message<Order>) {
    let _ = (msg.id(), msg.attempt(), msg.payload().id);
}

#[delay_listener(topic = "d", ack_timeout = "2m", backoff = "exp(100ms, 1h)")]
async fn manual(_msg: Message<Order>, ack: Ack) {
    let _ = ack.ack().await;
}

#[delay_listener(topic = "e")]
async fn manual_alias(_msg: Order, ack: Settle) -> Result<(), String> {
    ack.ack().await.map_err(|e| e.to_string())
}

#[delay_listener(topic = "f.g:h_i-j")]
async fn manual_reexport(_msg: serde_json::Value, _ack: reexport::Handle) {}


