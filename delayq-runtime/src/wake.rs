//! Wake-ups over pub/sub. Scripts publish on a topic's wake channel when a message lands
//! earlier than the head of `delayed` or a claim lands in an empty `inflight`; one subscriber
//! connection per runtime routes them to the sleeping boss or back pool. Idle listeners
//! therefore issue no commands beyond this connection's keepalive PING. After a (re)connect
//! every topic is woken once, since announcements may have been missed before the
//! subscription.
//!
//! A subscriber only reads, so a peer that vanished without closing the socket (a NAT or load
//! balancer dropping an idle flow) would leave every idle topic deaf. It PINGs every
//! `PING_EVERY` and reconnects when no answer comes within `PING_TIMEOUT`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::WAKE_BACK;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::health::{Health, RetryDelay};
use crate::topic::TopicRuntime;

/// How often the subscriber checks that Redis still answers on its connection.
const PING_EVERY: Duration = Duration::from_secs(15);
/// How long a PING may go unanswered before the connection counts as dead. A dead peer is
/// thus found within `PING_EVERY + PING_TIMEOUT` (25 s).
const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one attempt to connect and subscribe may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

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
        let connect = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channels).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let connected = tokio::select! {
            c = tokio::time::timeout(CONNECT_TIMEOUT, connect) => c,
            _ = stop.cancelled() => return,
        };
        match connected {
            Ok(Ok(pubsub)) => {
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
                let (mut sink, mut messages) = pubsub.split();
                let mut ping = tokio::time::interval(PING_EVERY);
                ping.reset();
                let why = loop {
                    tokio::select! {
                        message = messages.next() => match message {
                            Some(m) => {
                                if let Some(topic) = routes.get(m.get_channel_name()) {
                                    if m.get_payload_bytes() == WAKE_BACK {
                                        topic.wake_back.notify_one();
                                    } else {
                                        topic.wake_boss.notify_one();
                                    }
                                }
                            }
                            None => break "the pub/sub connection closed",
                        },
                        _ = ping.tick() => {
                            // Any reply will do: in subscriber mode Redis answers PING with
                            // a ["pong", ""] push, not +PONG.
                            match tokio::time::timeout(PING_TIMEOUT, sink.ping::<redis::Value>()).await {
                                Ok(Ok(_)) => {}
                                Ok(Err(_)) => break "a PING on the pub/sub connection failed",
                                Err(_) => break "Redis did not answer a PING on the pub/sub connection",
                            }
                        }
                        _ = stop.cancelled() => return,
                    }
                };
                health.failed(&why);
            }
            Ok(Err(e)) => health.failed(&e),
            Err(_) => health.failed(&"connecting the pub/sub connection timed out"),
        }
        tokio::select! {
            _ = tokio::time::sleep(retry.next_delay()) => {}
            _ = stop.cancelled() => return,
        }
    }
}
