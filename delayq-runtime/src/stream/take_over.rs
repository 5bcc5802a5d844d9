//! The take-over of a stream listener: every half min_idle, one script heartbeats this
//! consumer into the group's alive set and claims its rendezvous share of the entries idle
//! past min_idle (their consumer died or stalled, or a handler failed and its backoff
//! passed); entries delivered max_deliveries times, or no longer in the stream, go to the
//! dead-letter stream instead.
//!
//! A step claims no more entries than there are free slots, and each claimed entry starts at
//! once: an entry claimed to wait for a slot would be neither renewed nor in the books, and
//! another consumer would take it over again after min_idle and run it a second time. With
//! no free slot the step only heartbeats; when entries wait for this consumer, the reader is
//! told to give up its blocked read, and the slot it frees comes here first (the semaphore
//! serves waiters in order).

use std::sync::Arc;

use delayq_core::protocol::TakeOver;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::listener::StreamRuntime;
use super::reader::dispatch;
use crate::health::RetryDelay;
use crate::meter::Outcome;

/// Every this many steps, a step also clears expired heartbeats and deletes consumers that
/// are gone and hold nothing.
const CLEANUP_EVERY: u64 = 10;
/// The most entries one step looks at.
const MAX_STEP: usize = 1_000;

/// `held` (a slot already waited for) and every slot free now, up to `MAX_STEP` in all.
fn free_slots(
    slots: &Arc<Semaphore>,
    held: Option<OwnedSemaphorePermit>,
) -> Option<OwnedSemaphorePermit> {
    let have = held.as_ref().map_or(0, OwnedSemaphorePermit::num_permits);
    let more = slots.available_permits().min(MAX_STEP - have) as u32;
    let more = (more > 0)
        .then(|| slots.clone().try_acquire_many_owned(more).ok())
        .flatten();
    match (held, more) {
        (Some(mut held), Some(more)) => {
            held.merge(more);
            Some(held)
        }
        (held, more) => held.or(more),
    }
}

pub(crate) async fn run(stream: Arc<StreamRuntime>) {
    let mut retry = RetryDelay::new();
    let mut cursor: Option<String> = None;
    let mut steps: u64 = 0;
    let mut waited: Option<OwnedSemaphorePermit> = None;
    while !stream.stop.is_cancelled() {
        let mut permits = free_slots(&stream.slots, waited.take());
        let count = permits.as_ref().map_or(0, |p| p.num_permits());
        let step = TakeOver {
            alive_ttl: stream.alive_ttl(),
            min_idle: stream.min_idle(),
            count,
            max_deliveries: stream.options.max_attempts,
            cursor: cursor.as_deref(),
            cleanup: steps.is_multiple_of(CLEANUP_EVERY),
        };
        steps += 1;
        let report = match stream.group.take_over(step).await {
            Ok(report) => {
                stream.health.ok();
                retry.reset();
                report
            }
            Err(error) => {
                stream.health.failed(&error);
                drop(permits);
                tokio::select! {
                    _ = tokio::time::sleep(retry.next_delay()) => {}
                    _ = stream.stop.cancelled() => return,
                }
                continue;
            }
        };
        let dead = report.buried.len() + report.trimmed.len();
        stream.meter.handled(Outcome::Dead, dead as u64);
        stream.meter.dead_dropped(stream.group.take_dead_dropped());
        for id in &report.buried {
            tracing::warn!(stream = %stream.stream, group = %stream.group_name, %id, reason = "max_deliveries reached", "moved to the dead-letter stream");
        }
        for id in &report.trimmed {
            tracing::warn!(stream = %stream.stream, group = %stream.group_name, %id, reason = "trimmed", "a pending entry is no longer in the stream (trimmed or deleted); recorded in the dead-letter stream");
        }
        if !report.claimed.is_empty() {
            tracing::info!(stream = %stream.stream, group = %stream.group_name, count = report.claimed.len(), "took over idle entries");
        }
        let mut runs = Vec::with_capacity(report.claimed.len());
        for entry in report.claimed {
            // The script claims at most `count`: one held slot per entry.
            let Some(permit) = permits.as_mut().and_then(|p| p.split(1)) else {
                tracing::error!(stream = %stream.stream, id = %entry.id, "a take-over claimed more entries than it had slots; the entry is taken over again after min_idle");
                continue;
            };
            runs.push((entry, permit));
        }
        dispatch(&stream, runs);
        drop(permits);
        cursor = report.cursor;
        if cursor.is_some() && count > 0 {
            continue; // more idle entries to look at
        }
        if count == 0 && report.wanted > 0 {
            // Entries wait for this consumer and every slot is busy: take the next slot that
            // frees, ahead of the reader, which gives up a blocked read's slots for it.
            stream.reader_yield.notify_one();
            tokio::select! {
                permit = tokio::time::timeout(stream.take_over_every(), stream.slots.clone().acquire_owned()) => {
                    match permit {
                        Ok(Ok(permit)) => {
                            waited = Some(permit);
                            continue;
                        }
                        Ok(Err(_)) => return,
                        Err(_) => continue, // still busy: heartbeat again
                    }
                }
                _ = stream.stop.cancelled() => return,
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(stream.take_over_every()) => {}
            _ = stream.stop.cancelled() => return,
        }
    }
}
