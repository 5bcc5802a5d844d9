//! Refreshes the `delayq_pending` and `delayq_dead` gauges from Redis, when asked to
//! (`RuntimeBuilder::gauges_every`): what Redis holds is not something a runtime sees pass by,
//! so it is read, a few cheap reads per topic and stream each period. And
//! `delayq_schedule_stalled{schedule}`: 1 for each schedule of the namespace whose next tick
//! is more than a minute behind Redis' clock (no runtime produces it: none listens on its
//! topic, none runs, or its record is broken), back to 0 once it moves again; a schedule that
//! never stalled has no series. Read from the index and each record's `next`, in pipelines.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::Producer;
use tokio_util::sync::CancellationToken;

use crate::delay::TopicRuntime;
use crate::stream::StreamRuntime;

/// The refresh period a Prometheus endpoint sets when none was given.
pub(crate) const PROMETHEUS_GAUGES_EVERY: Duration = Duration::from_secs(10);

pub(crate) async fn run(
    producer: Producer,
    (topics, streams): (Vec<Arc<TopicRuntime>>, Vec<Arc<StreamRuntime>>),
    every: Duration,
    stop: CancellationToken,
) {
    let mut stalled: HashSet<String> = HashSet::new();
    loop {
        match producer.stalled_schedules().await {
            Ok(now) => {
                let now: HashSet<String> = now.into_iter().collect();
                for name in stalled.difference(&now) {
                    stalled_gauge(name).set(0.0);
                }
                for name in &now {
                    stalled_gauge(name).set(1.0);
                }
                stalled = now;
            }
            Err(error) => tracing::debug!(%error, "schedule gauges not refreshed"),
        }
        for t in &topics {
            match producer.counts(&t.name).await {
                Ok(c) => t.meter.holding(c.delayed as u64, c.dead as u64),
                Err(error) => tracing::debug!(topic = %t.name, %error, "gauges not refreshed"),
            }
        }
        for s in &streams {
            match producer.stream_stats(&s.stream).await {
                Ok(stats) => {
                    let lag = stats
                        .groups
                        .iter()
                        .find(|g| *g.group == *s.group_name)
                        .and_then(|g| g.lag)
                        .unwrap_or(0);
                    s.meter.holding(lag, stats.dead);
                }
                Err(error) => tracing::debug!(stream = %s.stream, %error, "gauges not refreshed"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => return,
        }
    }
}

fn stalled_gauge(schedule: &str) -> metrics::Gauge {
    metrics::gauge!(
        "delayq_schedule_stalled",
        [metrics::Label::new("schedule", schedule.to_string())].to_vec()
    )
}
