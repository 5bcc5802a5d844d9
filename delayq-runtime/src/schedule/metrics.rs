//! The schedules' metrics: `delayq_schedule_ticks_total{schedule,outcome}` (`produced`,
//! `skipped`) and `delayq_schedule_lag_seconds{schedule}`.
//!
//! Every series of a schedule is exported from when the runtime first knows the schedule, at
//! 0: Prometheus' `increase()` counts from a series' first sample, so a series that first
//! appeared at its first skip would never show that skip (nor alert on it).
//!
//! The lag is how late this process's latest write of the schedule's ticks was, held for
//! [`LAG_HELD`] and then back to 0 (or set again by the next write): a gauge that kept one
//! late write's lag until the next write (an hour, for an hourly schedule) kept
//! `DelayqScheduleLagging` firing that long after the schedule had caught up.

use std::time::Duration;

/// How long one write's lag is shown before the gauge goes back to 0: a scrape a minute sees
/// it, and a schedule whose writes keep being late (every minute or more often) keeps it up.
pub(crate) const LAG_HELD: Duration = Duration::from_secs(60);

fn ticks(name: &str, outcome: &'static str) -> metrics::Counter {
    metrics::counter!(
        "delayq_schedule_ticks_total",
        [
            metrics::Label::new("schedule", name.to_string()),
            metrics::Label::new("outcome", outcome),
        ]
        .to_vec()
    )
}

fn lag(name: &str) -> metrics::Gauge {
    metrics::gauge!(
        "delayq_schedule_lag_seconds",
        [metrics::Label::new("schedule", name.to_string())].to_vec()
    )
}

/// Exports schedule `name`'s tick counters at 0 if they are not there yet (a no-op for
/// series that have counted already).
pub(super) fn known(name: &str) {
    ticks(name, "produced").increment(0);
    ticks(name, "skipped").increment(0);
}

/// A write of `ticks` (and `skipped` ones) at `now_ms`: counted, and its lag (how late its
/// earliest tick was written, 0 when ahead of its time) set. Returns whether the lag is above
/// 0 (then [`lag_over`] sets it back after [`LAG_HELD`]).
pub(super) fn written(name: &str, written: &[u64], skipped: u64, now_ms: u64) -> bool {
    ticks(name, "produced").increment(written.len() as u64);
    if skipped > 0 {
        ticks(name, "skipped").increment(skipped);
        tracing::info!(
            schedule = name,
            count = skipped,
            "ticks skipped by the catch-up policy"
        );
    }
    let Some(first) = written.first() else {
        return false;
    };
    let late_ms = now_ms.saturating_sub(*first);
    lag(name).set(late_ms as f64 / 1_000.0);
    late_ms > 0
}

/// The lag of `name`'s latest write has been shown for [`LAG_HELD`]: back to 0.
pub(super) fn lag_over(name: &str) {
    lag(name).set(0.0);
}
