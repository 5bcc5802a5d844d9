//! Wake-ups over pub/sub. Scripts publish on a topic's wake channel when a message lands
//! earlier than the head of `delayed` ('d') or a claim lands in an empty `inflight` ('i'); one
//! subscriber connection per runtime routes them to the sleeping boss or back pool. Idle
//! listeners therefore issue no commands at all. After a (re)connect every topic is woken
//! once, since announcements may have been missed before the subscription.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::health::{Health, RetryDelay};
use crate::topic::TopicRuntime;

pub(crate) async fn run_subscriber(
    client: redis::Client,
    topics: Vec<Arc<TopicRuntime>>,
    stop: CancellationToken,
    subscribed: tokio::sync::oneshot::Sender<()>,
) {
    let mut subscribed = Some(subscribed);
    let routes: HashMap<String, Arc<TopicRuntime>> = topics
        .iter()
        .map(|t| (t.queue.keys().wake.clone(), t.clone()))
        .collect();
    let channels: Vec<String> = routes.keys().cloned().collect();
    let health = Health::new("wake-up subscriber".to_string());
    let mut retry = RetryDelay::new();
    while !stop.is_cancelled() {
        let connected = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channels).await?;
            Ok::<_, redis::RedisError>(pubsub)
        }
        .await;
        match connected {
            Ok(mut pubsub) => {
                health.ok();
                retry.reset();
                // Anything announced before this subscription (at start, or while
                // disconnected) was missed: every topic looks once.
                for t in &topics {
                    t.wake_boss.notify_one();
                    t.wake_back.notify_one();
                }
                if let Some(ready) = subscribed.take() {
                    let _ = ready.send(());
                }
                let mut messages = pubsub.on_message();
                loop {
                    tokio::select! {
                        message = messages.next() => match message {
                            Some(m) => {
                                if let Some(topic) = routes.get(m.get_channel_name()) {
                                    if m.get_payload_bytes() == b"i" {
                                        topic.wake_back.notify_one();
                                    } else {
                                        topic.wake_boss.notify_one();
                                    }
                                }
                            }
                            None => break,
                        },
                        _ = stop.cancelled() => return,
                    }
                }
                health.failed(&"the pub/sub connection closed");
            }
            Err(e) => health.failed(&e),
        }
        tokio::select! {
            _ = tokio::time::sleep(retry.next_delay()) => {}
            _ = stop.cancelled() => return,
        }
    }
}
