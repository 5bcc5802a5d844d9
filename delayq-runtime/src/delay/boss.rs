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
/// How much later than the due time a boss claims when another process took the last due
/// time it woke for: the one that claims first announces what it took (pub/sub, well under a
/// millisecond on one network), so the others sleep on to the next due time instead of all
/// claiming for nothing. Only when that one stops claiming (it stopped, or has no free slot)
/// does a due message wait this long.
const DEFER: Duration = Duration::from_millis(30);
/// An announcement this close (Redis' clock) to an empty claim at a due time says another
/// process took that due time.
const RACE_WINDOW_US: u64 = 50_000;

/// What a boss knows of the race for due times with other processes' bosses.
#[derive(Default)]
struct Race {
    /// Another process took the last due time this boss woke for: claim `DEFER` late.
    defer: bool,
    /// Redis' time (µs) of this boss's last claim, and whether it came back empty at a due
    /// time.
    claimed_us: u64,
    lost: bool,
    /// The last claim left due messages to the rate limit: sleep to its time, not woken by
    /// sends.
    deaf: bool,
}

pub(crate) async fn run(topic: Arc<TopicRuntime>) {
    let mut retry = RetryDelay::new();
    let ack_timeout = topic.options.ack_timeout();
    let mut race = Race::default();
    let mut at_due = false;
    let mut paused = false;
    topic.meter.paused(false);
    // While this boss claims again as soon as a slot frees (its last claim took all it asked
    // for), the acks of handlers that returned ride on its claims, with their slots (see
    // `ack_batcher.rs`); whenever it stops, what waits goes to the ack task.
    let mut riding = Riding::new(&topic);
    while !topic.stop.is_cancelled() {
        let first = tokio::select! {
            permit = topic.slots.clone().acquire_owned() => match permit {
                Ok(p) => Some(p),
                Err(_) => return,
            },
            _ = topic.acks.arrived(), if riding.on => None,
            _ = topic.stop.cancelled() => return,
        };
        let mut permits: Vec<OwnedSemaphorePermit> = first.into_iter().collect();
        // Slots free together (an ack call answers many handlers at once): the handlers already
        // woken run first and free theirs (or hand their acks over), so that one claim takes
        // them all (a few µs, against a call of one message each).
        tokio::task::yield_now().await;
        let ride = if riding.on {
            MAX_CLAIM_BATCH - permits.len()
        } else {
            0
        };
        // The slots the riders lend are this claim's once their acks are answered (if the call
        // fails, they go back to the runs, which retry their acks).
        let riders = topic.acks.take(ride);
        let lent = riders.lent();
        while permits.len() + lent < MAX_CLAIM_BATCH {
            match topic.slots.clone().try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
        let asked = permits.len() + lent;
        if asked == 0 {
            continue; // woken for an ack already taken
        }
        let sent = Instant::now();
        let result = topic
            .queue
            .claim_acking(asked, ack_timeout, &riders.items)
            .await;
        let replied = Instant::now();
        let batch = match result {
            Ok(batch) => {
                permits.extend(riders.answer(Ok(&batch.acked)));
                topic.health.ok();
                retry.reset();
                batch
            }
            Err(error) => {
                let error = Arc::new(error);
                drop(riders.answer(Err(error.clone())));
                topic.health.failed(&error);
                riding.set(false);
                drop(permits);
                topic.pause(retry.next_delay(), &topic.wake_boss).await;
                continue;
            }
        };
        if batch.paused != paused {
            paused = batch.paused;
            topic.meter.paused(paused);
            tracing::info!(topic = %topic.name, paused, "topic {}", if paused { "paused" } else { "resumed" });
        }
        if paused {
            riding.set(false);
            // Nothing is claimed until a resume wakes this boss (the safety sleep covers a
            // lost wake-up); the script refuses claims meanwhile, so no process slips one in.
            drop(permits);
            tokio::select! {
                _ = topic.wake_boss.notified() => {}
                _ = tokio::time::sleep(BOSS_SAFETY_SLEEP) => {}
                _ = topic.stop.cancelled() => return,
            }
            continue;
        }
        for (id, why) in &batch.undeliverable {
            tracing::error!(topic = %topic.name, %id, reason = %why, "claimed a message that cannot be delivered");
        }
        let got = batch.claimed.len() + batch.undeliverable.len();
        race.claimed_us = batch.now_us;
        // Only the first claim after sleeping to a due time can lose the race for it.
        race.lost = std::mem::take(&mut at_due) && got == 0;
        if got > 0 {
            race.defer = false;
        }
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
            riding.set(true);
            continue; // more may be due right now
        }
        riding.set(false);
        // Redis ran the claim about half a round trip before the reply arrived: Redis' time
        // `now_us` was then, here.
        let clock = (batch.now_us, replied - replied.duration_since(sent) / 2);
        let deadline = local_time(batch.next_due_ms, clock);
        // Held back by the rate limit: no send or retry can make a claim before the limit's
        // time take anything, so their wake-ups are not heard until then.
        race.deaf = batch.rate_limited;
        at_due = sleep_to_due(&topic, deadline, clock, &mut race).await;
    }
}

/// Whether acks ride on this boss's claims (`AckBatcher::ride`); off when the boss ends.
struct Riding<'a> {
    topic: &'a TopicRuntime,
    on: bool,
}

impl<'a> Riding<'a> {
    fn new(topic: &'a TopicRuntime) -> Self {
        Riding { topic, on: false }
    }

    fn set(&mut self, on: bool) {
        if self.on != on {
            self.on = on;
            self.topic.acks.ride(on);
        }
    }
}

impl Drop for Riding<'_> {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// When Redis' `due_ms` comes here, given Redis' time `now_us` was `then` here; the safety
/// sleep when nothing waits.
fn local_time(due_ms: Option<u64>, (now_us, then): (u64, Instant)) -> Instant {
    match due_ms {
        Some(due) => {
            let remaining = Duration::from_micros((due * 1000).saturating_sub(now_us));
            then + remaining.min(BOSS_SAFETY_SLEEP)
        }
        None => then + BOSS_SAFETY_SLEEP,
    }
}

/// The boss's sleep until the next due time; `true` when it ends there (not woken). tokio's
/// timer wakes up to a millisecond or two late, so the last few milliseconds are slept on a
/// blocking-pool thread, whose sleep is precise to tens of microseconds. Wake-ups still
/// interrupt the long part; an announcement that a claim (here or elsewhere) took what was
/// due moves the sleep to the next due time it names, with no call.
async fn sleep_to_due(
    topic: &TopicRuntime,
    mut deadline: Instant,
    clock: (u64, Instant),
    race: &mut Race,
) -> bool {
    loop {
        let target = if race.defer {
            deadline + DEFER
        } else {
            deadline
        };
        if let Some(coarse) = target.checked_sub(PRECISE_TAIL) {
            if coarse > Instant::now() {
                tokio::select! {
                    _ = tokio::time::sleep_until(coarse) => {}
                    _ = topic.wake_boss.notified(), if !race.deaf => return false,
                    _ = topic.rouse.notified(), if race.deaf => return false,
                    _ = topic.claimed.notified() => {
                        let (next_ms, at_us) = topic.claimed_next();
                        if race.lost && at_us.abs_diff(race.claimed_us) < RACE_WINDOW_US {
                            race.defer = true;
                        }
                        // Only news after this boss's own last claim moves its sleep. It also
                        // ends a wait on the rate limit: another process claimed, perhaps the
                        // last due message, and then stopped or filled its slots; sends must be
                        // heard again (at most one empty claim per announcement, until this
                        // boss's next claim finds the limit again).
                        if at_us > race.claimed_us {
                            deadline = local_time(next_ms, clock);
                            race.deaf = false;
                        }
                        continue;
                    }
                    _ = topic.stop.cancelled() => return false,
                }
            }
        }
        let tail = target.saturating_duration_since(Instant::now());
        if !tail.is_zero() {
            let _ = tokio::task::spawn_blocking(move || std::thread::sleep(tail)).await;
        }
        return true;
    }
}
