//! The take-over of a stream listener: every half min_idle, one script heartbeats this
//! consumer into the group's alive set and claims its rendezvous share of the entries idle
//! past min_idle (their consumer died or stalled, or a handler failed and its backoff
//! passed); entries delivered max_deliveries times go to the dead-letter stream instead.

use std::sync::Arc;

use delayq_core::protocol::TakeOver;

use crate::health::RetryDelay;
use crate::meter::Outcome;
use crate::stream::StreamRuntime;
use crate::stream_reader::dispatch;

/// Every this many steps, a step also clears expired heartbeats and deletes consumers that
/// are gone and hold nothing.
const CLEANUP_EVERY: u64 = 10;
/// The most entries one step looks at.
const MAX_STEP: usize = 1_000;

pub(crate) async fn run(stream: Arc<StreamRuntime>) {
    let mut retry = RetryDelay::new();
    let mut cursor: Option<String> = None;
    let mut steps: u64 = 0;
    while !stream.stop.is_cancelled() {
        let count = stream.slots.available_permits().clamp(1, MAX_STEP);
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
                tokio::select! {
                    _ = tokio::time::sleep(retry.next_delay()) => {}
                    _ = stream.stop.cancelled() => return,
                }
                continue;
            }
        };
        stream
            .meter
            .handled(Outcome::Dead, report.buried.len() as u64);
        for id in &report.buried {
            tracing::warn!(stream = %stream.stream, group = %stream.group_name, %id, reason = "max_deliveries reached", "moved to the dead-letter stream");
        }
        if !report.claimed.is_empty() {
            tracing::info!(stream = %stream.stream, group = %stream.group_name, count = report.claimed.len(), "took over idle entries");
        }
        for entry in report.claimed {
            let permit = match stream.slots.clone().acquire_owned().await {
                Ok(p) => p,
                Err(_) => return,
            };
            dispatch(&stream, vec![(entry, permit)]);
        }
        cursor = report.cursor;
        if cursor.is_some() {
            continue; // more idle entries to look at
        }
        tokio::select! {
            _ = tokio::time::sleep(stream.take_over_every()) => {}
            _ = stream.stop.cancelled() => return,
        }
    }
}
