//! The back pool of a topic: moves expired claims (of any process) back to `delayed`, then
//! sleeps until the earliest ack deadline in flight, or until a wake-up says a claim landed
//! in an empty `inflight` — with its deadline, so the sleep only moves earlier when that
//! deadline is earlier: another process's claim costs nothing before it is due back.

use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::DEAD_DROP_PER_CALL;
use tokio::time::Instant;

use super::topic::TopicRuntime;
use crate::health::RetryDelay;
use crate::meter::Outcome;

/// How often the back pool looks for expired claims when it knows of none (claims by other
/// processes are announced over pub/sub; this covers announcements lost in a disconnect).
pub(crate) const BACK_SAFETY_SWEEP: Duration = Duration::from_secs(120);
/// Expired claims handled per script call.
const REQUEUE_BATCH: usize = 1_000;

pub(crate) async fn run(topic: Arc<TopicRuntime>) {
    let mut retry = RetryDelay::new();
    while !topic.stop.is_cancelled() {
        // How long to sleep, and Redis' clock as of now (to place announced deadlines).
        let (wait, clock) = match topic
            .queue
            .requeue_expired(REQUEUE_BATCH, topic.options.max_attempts)
            .await
        {
            Ok(report) => {
                // Flow steps whose ends were noted but not settled (a process died between).
                match topic.queue.settle_ended_steps().await {
                    Ok(report) => {
                        super::ends::count(&topic.name, &report);
                        if let Some(e) = &report.error {
                            tracing::warn!(topic = %topic.name, error = %e, "flow steps' ends could not be settled; the next sweep tries again");
                        }
                    }
                    Err(e) => {
                        tracing::debug!(topic = %topic.name, error = %e, "settling ended flow steps failed; the next sweep tries again")
                    }
                }
                // Flows whose outbox senders died before they finished.
                if let Err(e) = topic.queue.send_stranded_outboxes().await {
                    tracing::debug!(error = %e, "sending stranded flow outboxes failed; the next sweep tries again");
                }
                topic.health.ok();
                topic.meter.handled(Outcome::Retry, report.requeued as u64);
                topic.meter.handled(Outcome::Dead, report.dead as u64);
                topic.meter.dead_dropped(topic.queue.take_dead_dropped());
                retry.reset();
                if report.requeued + report.dead > 0 {
                    tracing::info!(
                        topic = %topic.name,
                        requeued = report.requeued,
                        dead = report.dead,
                        "claims passed their ack deadline"
                    );
                }
                if report.requeued > 0 {
                    topic.wake_boss.notify_one();
                }
                if report.requeued + report.dead == REQUEUE_BATCH
                    || report.dead_dropped >= DEAD_DROP_PER_CALL
                {
                    continue;
                }
                let wait = match report.next_deadline_ms {
                    // A few ms past the deadline, so the claim has surely expired.
                    Some(at) => Duration::from_millis(at.saturating_sub(report.now_ms) + 5),
                    None => BACK_SAFETY_SWEEP,
                };
                (wait, Some((report.now_ms, Instant::now())))
            }
            Err(error) => {
                topic.health.failed(&error);
                (retry.next_delay(), None)
            }
        };
        let mut until = Instant::now() + wait.min(BACK_SAFETY_SWEEP);
        // Wake-ups that announce a claim's deadline move the next look earlier when it is;
        // others ask for a look now.
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => break,
                _ = topic.wake_back.notified() => match (topic.back_at(), clock) {
                    (Some(deadline_ms), Some((now_ms, then))) => {
                        let at = then + Duration::from_millis(deadline_ms.saturating_sub(now_ms) + 5);
                        until = until.min(at);
                    }
                    _ => break,
                },
                _ = topic.stop.cancelled() => break,
            }
        }
    }
}
