//! Stream listeners: other services publish order events to the Redis Stream `orders.v1`;
//! two consumer groups read it with the same macro style as delay listeners. `billing` acks
//! automatically and gives up on an order it cannot bill after two deliveries (it goes to the
//! dead-letter stream `{orders.v1}:dead`); `audit` acks by hand. A leader task runs on one
//! process only.
//!
//!     cargo run --example stream_consumer

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use delayq_runtime::{
    leader_task, stream_listener, Ack, Leadership, Producer, Runtime, StreamMessage,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct OrderPlaced {
    order_id: u64,
    cents: u64,
}

static BILLED: AtomicUsize = AtomicUsize::new(0);
static AUDITED: AtomicUsize = AtomicUsize::new(0);

// Auto ack: Ok acks (XACK); Err delivers the entry again after the backoff, and after
// max_deliveries it is dead-lettered.
#[stream_listener(
    stream = "orders.v1",
    group = "billing",
    max_deliveries = 2,
    min_idle = "1s",
    backoff = "fixed(200ms)"
)]
async fn bill(order: OrderPlaced) -> Result<(), String> {
    if order.cents == 0 {
        return Err(format!("order {}: nothing to bill", order.order_id));
    }
    println!("billing order {} for {} cents", order.order_id, order.cents);
    BILLED.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

// Manual ack: nothing is acked until `ack.ack()`.
#[stream_listener(stream = "orders.v1", group = "audit")]
async fn audit(msg: StreamMessage<OrderPlaced>, ack: Ack) {
    println!(
        "audit: order {} (entry {}, delivery {})",
        msg.payload().order_id,
        msg.id(),
        msg.deliveries()
    );
    ack.ack().await.expect("ack");
    AUDITED.fetch_add(1, Ordering::SeqCst);
}

// One process of the namespace runs this at a time; the token grows with each new leader.
#[leader_task(name = "orders.report", every = "1s")]
async fn report(leader: Leadership) {
    println!(
        "leader {}: {} billed, {} audited so far",
        leader.token(),
        BILLED.load(Ordering::SeqCst),
        AUDITED.load(Ordering::SeqCst)
    );
}

#[tokio::main]
async fn main() -> Result<(), delayq_runtime::Error> {
    let (url, _own_server) = delayq_examples::redis_for_examples();
    let runtime = Runtime::builder().redis_url(&url).spawn().await?;
    let producer: Producer = runtime.producer();

    let mut unbillable = String::new();
    for (order_id, cents) in [(1, 1_250), (2, 0), (3, 990)] {
        let id = producer
            .publish("orders.v1", &OrderPlaced { order_id, cents })
            .await?;
        if cents == 0 {
            unbillable = id;
        }
    }

    // Wait for billing to give up on order 2: its dead letter names the entry.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let letter = loop {
        let letters = producer
            .stream_dead_letters("orders.v1", "billing", 0..1_000)
            .await?;
        if let Some(l) = letters.into_iter().find(|l| l.entry_id == unbillable) {
            break l;
        }
        if tokio::time::Instant::now() > deadline {
            eprintln!("order 2 was not dead-lettered within 20 s");
            std::process::exit(1);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "dead letter: entry {} after {} deliveries: {}",
        letter.entry_id, letter.deliveries, letter.reason
    );
    while AUDITED.load(Ordering::SeqCst) < 3 || BILLED.load(Ordering::SeqCst) < 2 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    runtime.shutdown().await
}
