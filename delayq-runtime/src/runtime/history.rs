//! Writes the histories (`delayq stats --since`, the dashboard's charts): just after each
//! minute of this machine's clock, one script call each for
//! - every topic this process ran something on: what it counted (`Meter::minute`) with a
//!   sample of the topic's backlog; a topic with nothing counted only in the minutes whose
//!   number is a multiple of five, so ten idle listeners cost two calls a minute (0.03/s);
//! - every schedule whose ticks it handled (the names come from the ticks' ids; one that is
//!   no schedule of the topic is written nowhere);
//! - every stream group it consumes, as topics (its lag and pending entries sampled);
//! - every waiting room it ticks (how many wait and are inside), every minute (it ticks them
//!   every second anyway).
//!
//! What a write could not deliver (Redis away) is counted into the next one; the shutdown
//! writes the last counts once its handlers and acks are done (`write_last`).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_core::protocol::record_schedule_history;
use delayq_core::WaitingRoom;
use tokio_util::sync::CancellationToken;

use crate::delay::TopicRuntime;
use crate::meter::Minute;
use crate::stream::StreamRuntime;

/// Minutes between the backlog samples of a topic or group with nothing counted.
pub(crate) const IDLE_SAMPLE_MINUTES: u64 = 5;
/// How long after a minute ends the writes start: Redis' clock may be a little behind this
/// machine's, and `record.lua` files the counts in the minute that ended 10 s before its own
/// now.
const AFTER_MINUTE: Duration = Duration::from_secs(2);
/// How long the last write at shutdown may take.
const LAST_WRITE: Duration = Duration::from_secs(2);

/// What a runtime keeps a history of.
#[derive(Clone)]
pub(crate) struct Histories {
    pub(crate) topics: Vec<Arc<TopicRuntime>>,
    pub(crate) streams: Vec<Arc<StreamRuntime>>,
    pub(crate) rooms: Vec<WaitingRoom>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(crate) async fn run(all: Histories, stop: CancellationToken) {
    if all.topics.is_empty() && all.streams.is_empty() && all.rooms.is_empty() {
        return;
    }
    loop {
        let now = now_ms();
        let next = (now / 60_000 + 1) * 60_000 + AFTER_MINUTE.as_millis() as u64;
        // Up to a second more, so that many processes do not all write at the same instant.
        let spread = fastrand::u64(0..1_000);
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(next - now + spread)) => {}
            // The last counts are written by the shutdown, once the handlers and acks are done.
            _ = stop.cancelled() => return,
        }
        // The minute that ended, as `record.lua` files it.
        let sample = (now_ms().saturating_sub(10_000) / 60_000).is_multiple_of(IDLE_SAMPLE_MINUTES);
        write(&all, sample, true).await;
    }
}

/// At the end of a shutdown: what was counted since the last write, within a bound.
pub(crate) async fn write_last(all: &Histories) {
    if tokio::time::timeout(LAST_WRITE, write(all, false, false))
        .await
        .is_err()
    {
        tracing::debug!("the last minute's history was not written: Redis did not answer");
    }
}

/// Writes what was counted; with `sample`, the topics and groups with nothing counted too;
/// with `rooms`, the rooms.
async fn write(all: &Histories, sample: bool, rooms: bool) {
    for t in &all.topics {
        let m = t.meter.minute();
        let tally = m.take();
        if !tally.is_empty() || sample {
            if let Err(error) = t.queue.record_history(&tally).await {
                m.untake(&tally);
                tracing::debug!(topic = %t.name, %error, "history not written; counted into the next");
            }
        }
        let ticks: Vec<(Arc<str>, Arc<Minute>)> =
            std::mem::take(&mut *t.ticks.lock().unwrap_or_else(|p| p.into_inner()))
                .into_iter()
                .collect();
        for (name, m) in ticks {
            let tally = m.take();
            if tally.is_empty() {
                continue;
            }
            match record_schedule_history(&t.queue, &name, &tally).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::debug!(topic = %t.name, %name, "ticks of no schedule of the topic; not kept")
                }
                Err(error) => {
                    tracing::debug!(schedule = %name, %error, "schedule history not written")
                }
            }
        }
    }
    for s in &all.streams {
        let m = s.meter.minute();
        let tally = m.take();
        if tally.is_empty() && !sample {
            continue;
        }
        if let Err(error) = s.group.record_history(&tally).await {
            m.untake(&tally);
            tracing::debug!(stream = %s.stream, group = %s.group_name, %error, "history not written; counted into the next");
        }
    }
    if rooms {
        for r in &all.rooms {
            if let Err(error) = r.record_history().await {
                tracing::debug!(room = %r.name(), %error, "room history not written");
            }
        }
    }
}
