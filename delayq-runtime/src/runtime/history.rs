//! Writes each topic's history (`delayq stats --since`, the dashboard's charts): just after
//! each minute of this machine's clock, every topic this process ran something on adds what
//! it counted (`Meter::take_minute`) with a sample of the topic's backlog, one script call per
//! topic. A topic with nothing counted is sampled only in the minutes whose number is a multiple of five, so ten idle
//! listeners cost two calls a minute between them (0.03/s). What a write could not deliver
//! (Redis away) is counted into the next one; the shutdown writes the last counts once its
//! handlers and acks are done (`write_last`).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

use crate::delay::TopicRuntime;

/// Minutes between the backlog samples of a topic with nothing counted.
pub(crate) const IDLE_SAMPLE_MINUTES: u64 = 5;
/// How long after a minute ends the writes start: Redis' clock may be a little behind this
/// machine's, and `history.lua` files the counts in the minute that ended 10 s before its
/// own now.
const AFTER_MINUTE: Duration = Duration::from_secs(2);
/// How long the last write at shutdown may take.
const LAST_WRITE: Duration = Duration::from_secs(2);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(crate) async fn run(topics: Vec<Arc<TopicRuntime>>, stop: CancellationToken) {
    if topics.is_empty() {
        return;
    }
    loop {
        let now = now_ms();
        let next = (now / 60_000 + 1) * 60_000 + AFTER_MINUTE.as_millis() as u64;
        // Up to a second more, so that many processes do not all write at the same instant.
        let spread = fastrand::u64(0..1_000);
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(next - now + spread)) => {}
            // The last counts are written by the shutdown, once the handlers and acks are done
            // (`write_last`).
            _ = stop.cancelled() => return,
        }
        // The minute that ended, as `history.lua` files it.
        let sample = (now_ms().saturating_sub(10_000) / 60_000).is_multiple_of(IDLE_SAMPLE_MINUTES);
        write(&topics, sample).await;
    }
}

/// At the end of a shutdown: what was counted since the last write, within a bound.
pub(crate) async fn write_last(topics: &[Arc<TopicRuntime>]) {
    if tokio::time::timeout(LAST_WRITE, write(topics, false))
        .await
        .is_err()
    {
        tracing::debug!("the last minute's history was not written: Redis did not answer");
    }
}

/// Writes each topic's counts; with `sample`, those with nothing counted too.
async fn write(topics: &[Arc<TopicRuntime>], sample: bool) {
    for t in topics {
        let tally = t.meter.take_minute();
        if tally.is_empty() && !sample {
            continue;
        }
        if let Err(error) = t.queue.record_history(&tally).await {
            t.meter.untake_minute(&tally);
            tracing::debug!(topic = %t.name, %error, "history not written; counted into the next");
        }
    }
}
