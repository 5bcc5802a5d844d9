use delayq_runtime::{leader_task, stream_listener, Ack, Leadership, StreamMessage};
use serde::Deserialize;

#[derive(Deserialize)]
struct Order {
    id: u64,
}

#[stream_listener(stream = "orders.v1", group = "billing")]
async fn payload_auto(order: Order) -> Result<(), String> {
    let _ = order.id;
    Ok(())
}

#[stream_listener(stream = "orders.v1", group = "audit", start = "0", max_deliveries = 5, min_idle = "30s", batch = 10)]
async fn message_manual(msg: StreamMessage<Order>, ack: Ack) {
    let _ = (msg.id(), msg.stream(), msg.group(), msg.deliveries(), msg.payload().id);
    ack.ack().await.unwrap();
}

#[leader_task(name = "rollup", every = "10s")]
async fn rollup(leader: Leadership) -> Result<(), String> {
    let _ = leader.token();
    Ok(())
}

#[leader_task(name = "cleanup", every = "1m", ttl = "30s")]
async fn cleanup(leader: Leadership) {
    let _ = leader.is_current().await;
}


