//! The boss of a topic: waits for a free worker slot, claims as many due messages as there
//! are free slots (a third of the slots at most a call, two calls on their way while more is
//! due, the acks of handlers that returned riding on them), starts a worker for each, and
//! sleeps until the next due time when nothing is due (or until a wake-up says an earlier
//! message arrived).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::{ClaimBatch, Receipt, TopicQueue, MAX_CLAIM_BATCH};
use futures_util::stream::{FuturesOrdered, StreamExt};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tracing::Instrument;

use super::message::TopicDelivery;
use super::sleep::{local_time, sleep_to_due, Race, BOSS_SAFETY_SLEEP};
use super::topic::{self, TopicRuntime};
use crate::ack_batcher::Riders;
use crate::health::RetryDelay;
use crate::meter::Outcome;
use crate::worker;

/// A claim call on its way, with what it asked for, the slots it holds and the acks riding on
/// it; then its answer.
struct Flight {
    asked: usize,
    permits: Vec<OwnedSemaphorePermit>,
    riders: Riders<Receipt>,
    sent: Instant,
    result: Result<ClaimBatch, delayq_core::Error>,
    replied: Instant,
}

async fn fly(
    queue: TopicQueue,
    (asked, ack_timeout): (usize, Duration),
    permits: Vec<OwnedSemaphorePermit>,
    riders: Riders<Receipt>,
) -> Flight {
    let sent = Instant::now();
    let result = queue.claim_acking(asked, ack_timeout, &riders.items).await;
    Flight {
        asked,
        permits,
        riders,
        sent,
        result,
        replied: Instant::now(),
    }
}

/// What the boss does once no claim call is on its way.
enum Next {
    /// Claim as soon as a slot frees (more may be due).
    Claim,
    /// Sleep to the next due time (`sleep_to_due`'s deadline and clock).
    Sleep(Instant, (u64, Instant)),
    /// The call failed: claim again after the retry delay.
    Retry,
    /// The topic is paused: wait for a resume.
    Paused,
}

pub(crate) async fn run(topic: Arc<TopicRuntime>) {
    let ack_timeout = topic.options.ack_timeout();
    let mut boss = Boss {
        topic: &topic,
        retry: RetryDelay::new(),
        race: Race::default(),
        at_due: false,
        paused: false,
        riding: Riding::new(&topic),
    };
    topic.meter.paused(false);
    // A claim takes at most a third of the slots, and while its call is on its way (more is
    // due: the last took all it asked for) a second may go: one call (its acks and the next
    // claim) is in Redis while the handlers of another run here. One call at a time for every
    // slot would leave Redis idle while the handlers run and them idle while it works (a drain
    // at c200 ran 10 % slower than with ack calls of their own). Measured, alternating: a
    // third drained 85 – 90k msgs/s at c50 and 107 – 116k at c200, a half 69 – 80k and
    // 95 – 97k, a quarter 66 – 81k and 105 – 111k.
    let most = (topic.options.concurrency as usize / 3).clamp(1, MAX_CLAIM_BATCH);
    let mut flying = FuturesOrdered::new();
    let mut next = Next::Claim;
    loop {
        if flying.is_empty() {
            match std::mem::replace(&mut next, Next::Claim) {
                Next::Claim => {}
                Next::Sleep(deadline, clock) => {
                    boss.at_due = sleep_to_due(&topic, deadline, clock, &mut boss.race).await;
                }
                Next::Retry => topic.pause(boss.retry.next_delay(), &topic.wake_boss).await,
                Next::Paused => {
                    // Nothing is claimed until a resume wakes this boss (the safety sleep
                    // covers a lost wake-up); the script refuses claims meanwhile, so no
                    // process slips one in.
                    tokio::select! {
                        _ = topic.wake_boss.notified() => {}
                        _ = tokio::time::sleep(BOSS_SAFETY_SLEEP) => {}
                        _ = topic.stop.cancelled() => {}
                    }
                }
            }
            if topic.stop.is_cancelled() {
                return;
            }
        }
        // Once stopped, the calls on their way land (their deliveries run and are handed back
        // at the end) and no new one goes.
        let launch =
            flying.len() < 2 && (flying.is_empty() || boss.riding.on) && !topic.stop.is_cancelled();
        let first = tokio::select! {
            Some(flight) = flying.next(), if !flying.is_empty() => {
                next = boss.land(flight);
                continue;
            }
            permit = topic.slots.clone().acquire_owned(), if launch => match permit {
                Ok(p) => Some(p),
                Err(_) => return,
            },
            _ = topic.acks.arrived(), if launch && boss.riding.on => None,
            _ = topic.stop.cancelled(), if flying.is_empty() => return,
        };
        let mut permits: Vec<OwnedSemaphorePermit> = first.into_iter().collect();
        // Slots free together (an ack call answers many handlers at once): the handlers already
        // woken run first and free theirs (or hand their acks over), so that one claim takes
        // them all (a few µs, against a call of one message each).
        tokio::task::yield_now().await;
        let ride = if boss.riding.on {
            most - permits.len()
        } else {
            0
        };
        // The slots the riders lend are this claim's once their acks are answered (if the call
        // fails, they go back to the runs, which retry their acks).
        let riders = topic.acks.take(ride);
        let lent = riders.lent();
        while permits.len() + lent < most {
            match topic.slots.clone().try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
        let asked = permits.len() + lent;
        if asked == 0 {
            continue; // woken for an ack already taken
        }
        topic.claims_on_way.fetch_add(asked, Ordering::Relaxed);
        let call = fly(topic.queue.clone(), (asked, ack_timeout), permits, riders);
        flying.push_back(call);
    }
}

/// The boss's state between calls.
struct Boss<'a> {
    topic: &'a Arc<TopicRuntime>,
    retry: RetryDelay,
    race: Race,
    /// The last sleep ended at a due time (only the first claim after it can lose the race).
    at_due: bool,
    paused: bool,
    riding: Riding<'a>,
}

impl Boss<'_> {
    /// A claim call answered: its acks answered, its deliveries started; what to do next.
    fn land(&mut self, flight: Flight) -> Next {
        let topic = self.topic;
        let Flight {
            asked,
            mut permits,
            riders,
            sent,
            result,
            replied,
        } = flight;
        topic.claims_on_way.fetch_sub(asked, Ordering::Relaxed);
        let batch = match result {
            Ok(batch) => {
                permits.extend(riders.answer(Ok(&batch.acked)));
                topic.health.ok();
                self.retry.reset();
                batch
            }
            Err(error) => {
                let error = Arc::new(error);
                drop(riders.answer(Err(error.clone())));
                topic.health.failed(&error);
                self.riding.set(false);
                return Next::Retry;
            }
        };
        if batch.paused != self.paused {
            self.paused = batch.paused;
            topic.meter.paused(self.paused);
            tracing::info!(topic = %topic.name, paused = self.paused, "topic {}", if self.paused { "paused" } else { "resumed" });
        }
        if self.paused {
            self.riding.set(false);
            return Next::Paused;
        }
        for (id, why) in &batch.undeliverable {
            tracing::error!(topic = %topic.name, %id, reason = %why, "claimed a message that cannot be delivered");
        }
        if batch.buried > 0 {
            topic.meter.handled(Outcome::Dead, batch.buried);
            // Moving them to the dead letters may have dropped the oldest past the bounds.
            topic.meter.dead_dropped(topic.queue.take_dead_dropped());
        }
        let got = batch.claimed.len() + batch.undeliverable.len();
        let race = &mut self.race;
        race.claimed_us = batch.now_us;
        // Only the first claim after sleeping to a due time can lose the race for it.
        race.lost = std::mem::take(&mut self.at_due) && got == 0;
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
            let inbound = TopicDelivery {
                topic: topic.name.clone(),
                delivery,
                queue: topic.queue.clone(),
            };
            // Boxed before it is spawned: the task then holds a pointer, and the run (some
            // 850 bytes) is neither copied into the task nor allocated with the task's 128-byte
            // alignment, which took glibc's slow path for every message.
            let run = Box::pin(topic::run(topic.clone(), inbound, permit)).instrument(span);
            topic.runs.spawn(run);
        }
        drop(permits);
        if got == asked {
            self.riding.set(true);
            return Next::Claim; // more may be due right now
        }
        self.riding.set(false);
        // Redis ran the claim about half a round trip before the reply arrived: Redis' time
        // `now_us` was then, here.
        let clock = (batch.now_us, replied - replied.duration_since(sent) / 2);
        // Held back by the rate limit: no send or retry can make a claim before the limit's
        // time take anything, so their wake-ups are not heard until then.
        race.deaf = batch.rate_limited;
        Next::Sleep(local_time(batch.next_due_ms, clock), clock)
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
