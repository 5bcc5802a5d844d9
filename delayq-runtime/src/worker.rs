//! A worker runs one delivery: decode, call the handler in its own task (so a panic is caught),
//! renew the lease while it runs, then ack, retry or dead-letter as the mode says.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::Claimed;
use delayq_core::AckError;
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

use crate::ack::{Ack, DeliveryState};
use crate::handler::Delivery;
use crate::health::RetryDelay;
use crate::topic::TopicRuntime;

fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}

/// Runs a settle call until it lands, is stale, or the shutdown grace ends. A settle that
/// never lands leaves the message claimed; it is delivered again after its deadline.
async fn settle<F, Fut>(topic: &TopicRuntime, what: &'static str, call: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), AckError>>,
{
    let mut retry = RetryDelay::new();
    loop {
        match call().await {
            Ok(()) => {
                topic.health.ok();
                return;
            }
            Err(AckError::Stale) => {
                tracing::warn!(
                    settle = what,
                    "ack not applied: this delivery is stale (its ack deadline passed and the message was delivered again)"
                );
                return;
            }
            Err(AckError::Redis(e)) => {
                topic.health.failed(&e);
                tokio::select! {
                    _ = tokio::time::sleep(retry.next_delay()) => {}
                    _ = topic.abort.cancelled() => return,
                }
            }
        }
    }
}

pub(crate) async fn run(topic: Arc<TopicRuntime>, claimed: Claimed, permit: OwnedSemaphorePermit) {
    let _permit = permit;
    let state = DeliveryState::new(
        &topic,
        claimed.id.clone(),
        claimed.token(),
        claimed.envelope.attempt,
    );
    topic.remember(&state);
    let delivery = Delivery {
        topic: &topic.name,
        claimed: &claimed,
    };
    let ack = Ack {
        state: state.clone(),
    };
    let future = match topic.handler.call(&delivery, ack) {
        Ok(f) => f,
        Err(reason) => {
            tracing::error!(%reason, "payload does not decode; dead-lettered without retry");
            settle(&topic, "dead-letter", || state.nack("", Some(&reason))).await;
            return;
        }
    };
    let mut handler = tokio::spawn(future.in_current_span());
    let lease = topic.options.ack_timeout();
    let renew_every = (lease / 3).max(Duration::from_millis(10));
    let mut lease_lost = false;
    let finished = loop {
        tokio::select! {
            result = &mut handler => break result,
            _ = tokio::time::sleep(renew_every), if !lease_lost => {
                if state.is_settled() {
                    continue;
                }
                match state.extend(lease).await {
                    Ok(()) => topic.health.ok(),
                    Err(AckError::Stale) => {
                        // Renewing again cannot win it back; say so once.
                        lease_lost = true;
                        tracing::warn!(
                            "lease lost while the handler runs (this process was stalled past the ack deadline?): the message was delivered again; this run's outcome will be refused"
                        );
                    }
                    Err(AckError::Redis(e)) => topic.health.failed(&e),
                }
            }
            _ = topic.abort.cancelled() => {
                // Shutdown grace is over: stop the handler; the claim is handed back.
                handler.abort();
                return;
            }
        }
    };
    let result = match finished {
        Ok(result) => result,
        Err(e) if e.is_panic() => Err(format!(
            "handler panicked: {}",
            panic_text(&*e.into_panic())
        )),
        Err(_) => return,
    };
    if state.is_settled() {
        return;
    }
    match (topic.handler.manual(), result) {
        (false, Ok(())) => settle(&topic, "ack", || state.ack()).await,
        (_, Err(error)) => {
            tracing::warn!(%error, "handler failed");
            settle(&topic, "retry", || state.nack(&error, None)).await;
        }
        (true, Ok(())) => {
            // Returned without acking: the ack deadline counts from now. If the Ack was
            // dropped, the message is delivered again after it.
            if let Err(AckError::Redis(e)) = state.extend(lease).await {
                topic.health.failed(&e);
            }
            let topic = topic.clone();
            tokio::spawn(async move {
                tokio::time::sleep(lease).await;
                if !state.is_settled() {
                    topic.forget(&state.id, state.token);
                }
            });
        }
    }
}
