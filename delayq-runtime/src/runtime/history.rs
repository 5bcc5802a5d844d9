//! Writes the histories (`delayq stats --since`, the dashboard's charts): just after each
//! minute of this machine's clock, one script call each for
//! - every topic this process ran something on: what it counted (`Meter::minute`) with a
//!   sample of the topic's backlog (a topic nothing happened on is sampled by the back pool's
//!   sweep, every two minutes, in the call it makes anyway: idle listeners cost nothing more);
//! - the schedules whose ticks it handled, in one call per topic however many (the names come
//!   from the ticks' ids, which senders choose; one that is no schedule of the topic is
//!   written nowhere);
//! - every stream group it handled something of (its lag and pending entries sampled);
//! - every waiting room it ticks (how many wait and are inside), every minute (it ticks them
//!   every second anyway).
//!
//! What a write could not deliver (Redis away) is counted into the next one; the shutdown
//! writes the last counts once its handlers and acks are done (`write_last`).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_core::protocol::{record_schedule_histories, Tally};
use delayq_core::WaitingRoom;
use tokio_util::sync::CancellationToken;

use crate::delay::TopicRuntime;
use crate::meter::Minute;
use crate::stream::StreamRuntime;

/// How long after a minute ends the writes start: Redis' clock may be a little behind this
/// machine's, and `record.lua` files the counts in the minute that ended 10 s before its own
/// now.
const AFTER_MINUTE: Duration = Duration::from_secs(2);
/// How long the last write at shutdown may take at least (it shares the hand-back's deadline
/// otherwise, so that a dead Redis does not lengthen a shutdown by much).
const LAST_WRITE: Duration = Duration::from_millis(500);

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
        write(&all, true).await;
    }
}

/// At the end of a shutdown: what was counted since the last write, by `deadline` (or within
/// LAST_WRITE).
pub(crate) async fn write_last(
    (topics, streams): (&[Arc<TopicRuntime>], &[Arc<StreamRuntime>]),
    deadline: tokio::time::Instant,
) {
    // Rooms are sampled each minute; nothing is counted for them.
    let all = &Histories {
        topics: topics.to_vec(),
        streams: streams.to_vec(),
        rooms: Vec::new(),
    };
    let deadline = deadline.max(tokio::time::Instant::now() + LAST_WRITE);
    if tokio::time::timeout_at(deadline, write(all, false))
        .await
        .is_err()
    {
        tracing::debug!("the last minute's history was not written: Redis did not answer");
    }
}

/// Writes what was counted (nothing for a topic or group with nothing counted). With
/// `minute_ended` (the minute's writes), the counts are filed in the minute that just ended and
/// the rooms sampled; else (the shutdown's) in the current minute.
async fn write(all: &Histories, minute_ended: bool) {
    let rooms = minute_ended;
    for t in &all.topics {
        let m = t.meter.minute();
        let tally = Tally {
            minute_ended,
            ..m.take()
        };
        if !tally.is_empty() {
            if let Err(error) = t.queue.record_history(&tally).await {
                m.untake(&tally);
                tracing::debug!(topic = %t.name, %error, "history not written; counted into the next");
            }
        }
        // Each schedule's count. A name no running claim holds leaves the map (claims get
        // theirs under the same lock), so the map keeps to the names of the minute; a tick
        // still running when its count is taken adds to the next write.
        let ticks: Vec<(Arc<str>, Arc<Minute>)> = {
            let mut map = t.ticks.lock().unwrap_or_else(|p| p.into_inner());
            let all = map.iter().map(|(n, m)| (n.clone(), m.clone())).collect();
            // Held by the map and by `all`: by no claim.
            map.retain(|_, m| Arc::strong_count(m) > 2);
            all
        };
        let counted: Vec<(Arc<str>, Arc<Minute>, Tally)> = ticks
            .into_iter()
            .map(|(name, m)| {
                let tally = Tally {
                    minute_ended,
                    ..m.take()
                };
                (name, m, tally)
            })
            .filter(|(_, _, tally)| !tally.is_empty())
            .collect();
        if counted.is_empty() {
            continue;
        }
        // All of the topic's schedules in one call, however many names the ids brought.
        let batch: Vec<(&str, &Tally)> = counted.iter().map(|(n, _, t)| (&**n, t)).collect();
        match record_schedule_histories(&t.queue, &batch).await {
            Ok(written) => {
                for ((name, _, _), w) in counted.iter().zip(written) {
                    if !w {
                        tracing::debug!(topic = %t.name, %name, "ticks of no schedule of the topic; not kept");
                    }
                }
            }
            Err(error) => {
                // Counted into the next write: into each name's count in the map (put back if
                // it left it).
                let mut map = t.ticks.lock().unwrap_or_else(|p| p.into_inner());
                for (name, m, tally) in counted {
                    map.entry(name).or_insert(m).untake(&tally);
                }
                tracing::debug!(topic = %t.name, %error, "schedule histories not written; counted into the next");
            }
        }
    }
    for s in &all.streams {
        let m = s.meter.minute();
        let tally = Tally {
            minute_ended,
            ..m.take()
        };
        if tally.is_empty() {
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
