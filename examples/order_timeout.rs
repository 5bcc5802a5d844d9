//! Order timeouts: every order gets a timeout message when it is placed; paying cancels it, so
//! only unpaid orders are closed.
//!
//!     cargo run --example order_timeout

use std::time::Duration;

use delayq_runtime::{delay_listener, Cancelled, Producer, Runtime, SendOptions};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct OrderTimeout {
    order_id: u64,
}

#[delay_listener(topic = "order.timeout")]
async fn close_unpaid_order(msg: OrderTimeout) -> Result<(), String> {
    println!("order {}: not paid in time, closing it", msg.order_id);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), delayq_runtime::Error> {
    let (url, _own_server) = delayq_examples::redis_for_examples();
    let namespace = format!("orders-{}", std::process::id());
    let runtime = Runtime::builder()
        .redis_url(&url)
        .namespace(&namespace)
        .spawn()
        .await?;
    // The runtime's own producer: same Redis, same namespace.
    let producer: Producer = runtime.producer();

    for order_id in 1..=3 {
        // The order id as message id: placing the same order twice schedules one timeout.
        let options = SendOptions::new()
            .id(format!("order-{order_id}"))
            .delay(Duration::from_secs(2));
        let outcome = producer
            .send_with("order.timeout", &OrderTimeout { order_id }, options)
            .await?;
        println!("order {order_id}: placed, timeout {}", outcome.id());
    }

    tokio::time::sleep(Duration::from_millis(500)).await;
    let paid = "order-2".parse()?;
    match producer.cancel("order.timeout", &paid).await? {
        Cancelled::Removed => println!("order 2: paid, its timeout is cancelled"),
        other => println!("order 2: paid, but the timeout was {other:?}"),
    }

    tokio::time::sleep(Duration::from_secs(3)).await;
    let left = producer.counts("order.timeout").await?;
    println!("left in the queue: {left:?}");
    runtime.shutdown().await
}
