//! History: per minute for a day and per hour for 30 days, what handlers did (ok, retried,
//! dead, timed out, lateness) and what waited (delayed, due, in flight), for `delayq stats
//! --since` and the dashboard's charts. Kept for each topic, each schedule (its ticks' lag),
//! each stream group and each waiting room. Each runtime process adds what it counted once a
//! minute (one script call each, `scripts/history/record.lua`); the points live in two hashes
//! in the slot of what they describe, rings of fixed size, so a history is bounded whatever
//! the traffic or the downtime. The writers are in the delay, stream and room modules.

use std::time::{Duration, SystemTime};

use crate::connection::RedisConn;
use crate::error::Result;
use crate::script::scripts;
use crate::time::ms_to_time;

/// Adding to a history: prepended to `record.lua` and to the delay queue's sweep.
pub(crate) const MERGE: &str = include_str!("scripts/history/merge.lua");

scripts!(
    HistoryScripts,
    HISTORY_SCRIPTS,
    "history/",
    MERGE,
    [record, schedules]
);

/// The upper edges (ms) of the lateness bins a point counts handler starts in; a last bin
/// takes the rest (later than 5 min). The same edges as the `delayq_lateness_seconds`
/// histogram.
pub const LATENESS_BINS_MS: [u64; 14] = [
    1, 5, 10, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000,
];
const BINS: usize = LATENESS_BINS_MS.len() + 1;

/// What a process counted of a topic since it last wrote to the topic's history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Runs acknowledged.
    pub ok: u64,
    /// Runs retried.
    pub retry: u64,
    /// Messages moved to the dead letters.
    pub dead: u64,
    /// Runs stopped at their `timeout`.
    pub timed_out: u64,
    /// Handler starts per lateness bin ([`LATENESS_BINS_MS`], then the rest).
    pub lateness: [u64; BINS],
    /// The counts are of the minute that just ended (a runtime's writer, a few seconds after
    /// it): filed in the minute of Redis' clock 10 s before the write. Else (the last counts
    /// at a shutdown) in the minute of the write.
    pub minute_ended: bool,
}

impl Tally {
    /// The lateness bin of a start `late` after its due time.
    pub fn bin(late: Duration) -> usize {
        // In µs, so that 1.5 ms counts as more than 1 ms.
        let us = late.as_micros();
        LATENESS_BINS_MS
            .iter()
            .position(|&edge| us <= u128::from(edge) * 1_000)
            .unwrap_or(BINS - 1)
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.ok == 0
            && self.retry == 0
            && self.dead == 0
            && self.timed_out == 0
            && self.lateness.iter().all(|n| *n == 0)
    }

    pub(crate) fn arg(&self) -> String {
        let mut words = vec![self.ok, self.retry, self.dead, self.timed_out];
        words.extend(self.lateness);
        words
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One point of a history: a minute (or an hour). For a stream group, `delayed` and `due`
/// are its lag (entries not delivered yet) and `inflight` its pending entries; for a waiting
/// room, `delayed` is how many wait and `inflight` how many are inside; a schedule's has no
/// backlog (its ticks' handling and lateness only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryPoint {
    /// When the minute (or hour) began.
    pub at: SystemTime,
    /// Runs acknowledged in it, over all processes.
    pub ok: u64,
    /// Runs retried.
    pub retry: u64,
    /// Messages moved to the dead letters.
    pub dead: u64,
    /// Runs stopped at their `timeout`.
    pub timed_out: u64,
    /// Messages waiting (due or not) when it was last sampled in it.
    pub delayed: u64,
    /// Of those, due and not yet claimed.
    pub due: u64,
    /// In flight.
    pub inflight: u64,
    /// The lateness (start minus due time) half of its starts stayed within, as the upper
    /// edge of its bin ([`LATENESS_BINS_MS`]); `None` without starts. A start later than
    /// the last edge counts as `Duration::MAX`.
    pub lateness_p50: Option<Duration>,
    /// The same for 99 % of its starts.
    pub lateness_p99: Option<Duration>,
    /// Handler starts in it.
    pub started: u64,
}

/// A history over a window, oldest first; minutes and hours nobody wrote (no runtime ran, or
/// nothing happened and nothing waited) are absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    /// What it is of: the topic, the schedule, `stream/group`, or the room.
    pub name: String,
    /// The width of a point: a minute, or an hour for a window longer than a day.
    pub step: Duration,
    /// The points, oldest first.
    pub points: Vec<HistoryPoint>,
    /// The Redis server's clock when it was read.
    pub read_at: SystemTime,
}

/// The longest window the minutes hold; a longer one reads the hours.
pub const HISTORY_MINUTES: Duration = Duration::from_secs(24 * 3_600);
/// The longest window the hours hold; a longer one reads what there is.
pub const HISTORY_HOURS: Duration = Duration::from_secs(30 * 24 * 3_600);

/// The sum of `n`, saturating (a hand-edited point may hold any number).
fn sum(n: &[u64]) -> u64 {
    n.iter().fold(0, |a, b| a.saturating_add(*b))
}

fn percentile(bins: &[u64], q: f64) -> Option<Duration> {
    let total = sum(bins);
    if total == 0 {
        return None;
    }
    let want = (total as f64 * q).ceil() as u64;
    let mut seen = 0;
    for (i, n) in bins.iter().enumerate() {
        seen = n.saturating_add(seen);
        if seen >= want {
            return Some(
                LATENESS_BINS_MS
                    .get(i)
                    .map_or(Duration::MAX, |&ms| Duration::from_millis(ms)),
            );
        }
    }
    Some(Duration::MAX)
}

/// A stored point, `None` when it does not parse (a hand-edited field is skipped).
fn point(text: &str, step_ms: u64) -> Option<(u64, HistoryPoint)> {
    let n: Vec<u64> = text
        .split(' ')
        .map(str::parse)
        .collect::<std::result::Result<_, _>>()
        .ok()?;
    if n.len() != 8 + BINS {
        return None;
    }
    let bins = &n[8..];
    Some((
        n[0],
        HistoryPoint {
            at: ms_to_time(n[0].checked_mul(step_ms)?),
            ok: n[1],
            retry: n[2],
            dead: n[3],
            timed_out: n[4],
            delayed: n[5],
            due: n[6],
            inflight: n[7],
            lateness_p50: percentile(bins, 0.5),
            lateness_p99: percentile(bins, 0.99),
            started: sum(bins),
        },
    ))
}

/// What a write samples besides the counts.
pub(crate) enum Sample<'a> {
    /// A topic's delayed, due and in flight, from its keys `delayed`, `ready`, `inflight` and
    /// `farinfo`.
    Topic([&'a str; 4]),
    /// A stream group's lag and pending entries.
    Group { stream: &'a str, group: &'a str },
    /// Three numbers sampled by the caller.
    Given([u64; 3]),
}

/// Adds `tally` (and a sample) to the history in `minutes` and `hours`. One script call.
pub(crate) async fn record(
    conn: &RedisConn,
    (minutes, hours): (&str, &str),
    sample: Sample<'_>,
    tally: &Tally,
) -> Result<()> {
    let mut inv = HISTORY_SCRIPTS.record.key(minutes);
    inv.key(hours)
        .arg(tally.arg())
        .arg(if tally.minute_ended { "1" } else { "0" });
    match sample {
        Sample::Topic([delayed, ready, inflight, farinfo]) => {
            inv.key(delayed)
                .key(ready)
                .key(inflight)
                .key(farinfo)
                .arg("topic");
        }
        Sample::Group { stream, group } => {
            inv.key(stream).arg("group").arg(group);
        }
        Sample::Given([a, b, c]) => {
            inv.arg("given").arg(a).arg(b).arg(c);
        }
    }
    let _minute: i64 = conn.run_script(inv).await?;
    Ok(())
}

/// The history `name` in `minutes` / `hours` over the last `window`: a point a minute for up
/// to a day, an hour beyond (at most 30 days). One read of a bounded hash (at most 1,440
/// fields).
pub(crate) async fn read(
    conn: &RedisConn,
    name: &str,
    (minutes, hours): (&str, &str),
    window: Duration,
) -> Result<History> {
    let (key, step) = if window <= HISTORY_MINUTES {
        (minutes, Duration::from_secs(60))
    } else {
        (hours, Duration::from_secs(3_600))
    };
    let (fields, (secs, micros)): (Vec<(String, String)>, (u64, u64)) = conn
        .run(|mut c| {
            let mut pipe = redis::pipe();
            pipe.hgetall(key).cmd("TIME");
            async move { pipe.query_async(&mut c).await }
        })
        .await?;
    let now_ms = secs * 1_000 + micros / 1_000;
    let step_ms = step.as_millis() as u64;
    let window_ms = window.min(HISTORY_HOURS).as_millis() as u64;
    let first = now_ms.saturating_sub(window_ms) / step_ms;
    let last = now_ms / step_ms;
    let mut points: Vec<(u64, HistoryPoint)> = fields
        .iter()
        .filter_map(|(_, v)| point(v, step_ms))
        .filter(|(stamp, _)| (first..=last).contains(stamp))
        .collect();
    points.sort_by_key(|(stamp, _)| *stamp);
    Ok(History {
        name: name.to_string(),
        step,
        points: points.into_iter().map(|(_, p)| p).collect(),
        read_at: ms_to_time(now_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_and_percentiles() {
        assert_eq!(Tally::bin(Duration::ZERO), 0);
        assert_eq!(Tally::bin(Duration::from_millis(1)), 0);
        assert_eq!(Tally::bin(Duration::from_micros(1_500)), 1);
        assert_eq!(Tally::bin(Duration::from_secs(300)), 13);
        assert_eq!(Tally::bin(Duration::from_secs(301)), 14);
        let mut bins = [0u64; BINS];
        bins[0] = 98;
        bins[3] = 1;
        bins[14] = 1;
        assert_eq!(percentile(&bins, 0.5), Some(Duration::from_millis(1)));
        assert_eq!(percentile(&bins, 0.99), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&bins, 1.0), Some(Duration::MAX));
        assert_eq!(percentile(&[0; BINS], 0.5), None);
    }

    #[test]
    fn a_hand_edited_point_is_skipped() {
        assert!(point("12 1 2 3", 60_000).is_none());
        assert!(point("x 1 2 3 4 5 6 7 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0", 60_000).is_none());
        let (stamp, p) = point("2 1 2 3 4 5 6 7 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0", 60_000).unwrap();
        assert_eq!((stamp, p.ok, p.inflight, p.started), (2, 1, 7, 1));
        assert_eq!(p.at, ms_to_time(120_000));
        assert!(point(
            &format!("{} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0", u64::MAX),
            60_000
        )
        .is_none());
    }
}
