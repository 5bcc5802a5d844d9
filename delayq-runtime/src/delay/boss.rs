//! The boss of a topic: waits for a free worker slot, claims as many due messages as there
//! are free slots, starts a worker for each, and sleeps until the next due time when nothing
//! is due (or until a wake-up says an earlier message arrived).

use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::MAX_CLAIM_BATCH;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tracing::Instrument;

use super::topic::{self, TopicRuntime};
use crate::health::RetryDelay;
use crate::worker;

/// How long a boss with nothing due sleeps before looking again, in case a wake-up was lost.
pub(crate) const BOSS_SAFETY_SLEEP: Duration = Duration::from_secs(300);
/// The last part of a boss's sleep to a due time, slept precisely (see `sleep_to_due`).
const PRECISE_TAIL: Duration = Duration::from_millis(3);

pub(crate) async fn run(topic: Arc<TopicRuntime>) {
    let mut retry = RetryDelay::new();
    let lease = topic.options.ack_timeout();
    while !topic.stop.is_cancelled() {
        let first = tokio::select! {
            permit = topic.slots.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => return,
            },
            _ = topic.stop.cancelled() => return,
        };
        let mut permits: Vec<OwnedSemaphorePermit> = vec![first];
        while permits.len() < MAX_CLAIM_BATCH {
            match topic.slots.clone().try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
        let asked = permits.len();
        let sent = Instant::now();
        let result = topic.queue.claim_due(asked, lease).await;
        let replied = Instant::now();
        let batch = match result {
            Ok(batch) => {
                topic.health.ok();
                retry.reset();
                batch
            }
            Err(error) => {
                topic.health.failed(&error);
                drop(permits);
                topic.pause(retry.next_delay(), &topic.wake_boss).await;
                continue;
            }
        };
        for (id, why) in &batch.undeliverable {
            tracing::error!(topic = %topic.name, %id, reason = %why, "claimed a message that cannot be delivered");
        }
        let got = batch.claimed.len() + batch.undeliverable.len();
        for delivery in batch.claimed {
            let permit = permits.pop().expect("one slot per claimed message");
            // WARN level, so the topic and id stay on the warnings a handler run can log
            // even when a service filters out INFO.
            let span = tracing::warn_span!(
                "delayq.handle",
                topic = %topic.name,
                id = %delivery.id,
                attempt = delivery.envelope.attempt
            );
            worker::follow_sender(&span, &delivery.envelope.trace);
            tokio::spawn(topic::run(topic.clone(), delivery, permit).instrument(span));
        }
        drop(permits);
        if got == asked {
            continue; // more may be due right now
        }
        let deadline = match batch.next_due_ms {
            // Redis ran the claim about half a round trip before the reply arrived.
            Some(due) => {
                let remaining = Duration::from_micros((due * 1000).saturating_sub(batch.now_us));
                let since_claim = replied.duration_since(sent) / 2;
                replied + remaining.saturating_sub(since_claim).min(BOSS_SAFETY_SLEEP)
            }
            None => replied + BOSS_SAFETY_SLEEP,
        };
        sleep_to_due(&topic, deadline).await;
    }
}

/// The boss's sleep until the next due time. tokio's timer wakes up to a millisecond or two
/// late, so the last few milliseconds are slept on a blocking-pool thread, whose sleep is
/// precise to tens of microseconds. Wake-ups still interrupt the long part.
async fn sleep_to_due(topic: &TopicRuntime, deadline: Instant) {
    if let Some(coarse) = deadline.checked_sub(PRECISE_TAIL) {
        if coarse > Instant::now() {
            tokio::select! {
                _ = tokio::time::sleep_until(coarse) => {}
                _ = topic.wake_boss.notified() => return,
                _ = topic.stop.cancelled() => return,
            }
        }
    }
    let tail = deadline.saturating_duration_since(Instant::now());
    if !tail.is_zero() {
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(tail)).await;
    }
}
