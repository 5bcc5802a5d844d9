//! `delayq stats --since 1h` and the dashboard's charts: a history (of a topic, a schedule, a
//! stream group or a waiting room) as JSON (a point a minute or an hour) and as sparklines for
//! a terminal, oldest left.

use std::time::Duration;

use delayq_core::{History, HistoryPoint};
use serde_json::{json, Value};

use super::text::ms;

/// Columns of a sparkline at most: a longer window sums (or, for levels, takes the highest
/// of) several points a column.
const WIDTH: usize = 60;
const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

fn lateness_ms(d: Option<Duration>) -> Value {
    match d {
        None => Value::Null,
        Some(d) if d == Duration::MAX => json!("over 300000"),
        Some(d) => json!(d.as_millis() as u64),
    }
}

/// What a history is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Topic,
    Schedule,
    /// A stream group (`stream/group`).
    Group,
    Room,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Topic => "topic",
            Kind::Schedule => "schedule",
            Kind::Group => "group",
            Kind::Room => "room",
        }
    }
}

pub(crate) fn history_json(kind: Kind, h: &History) -> Value {
    json!({
        "kind": kind.as_str(),
        "name": h.name,
        "step_s": h.step.as_secs(),
        "read_at_ms": ms(h.read_at),
        "points": h.points.iter().map(|p| json!({
            "at_ms": ms(p.at),
            "ok": p.ok,
            "retry": p.retry,
            "dead": p.dead,
            "timed_out": p.timed_out,
            "started": p.started,
            "lateness_p50_ms": lateness_ms(p.lateness_p50),
            "lateness_p99_ms": lateness_ms(p.lateness_p99),
            "delayed": p.delayed,
            "due": p.due,
            "inflight": p.inflight,
        })).collect::<Vec<_>>(),
    })
}

/// The values of one series over the window's slots (`None`: nothing written then).
fn slots(h: &History, window: Duration, value: impl Fn(&HistoryPoint) -> u64) -> Vec<Option<u64>> {
    let step = h.step.as_millis().max(1) as u64;
    let end = ms(h.read_at) / step;
    let n = (window.as_millis() as u64 / step).max(1);
    let mut out = vec![None; n as usize];
    for p in &h.points {
        let stamp = ms(p.at) / step;
        if stamp <= end && end - stamp < n {
            out[(n - 1 - (end - stamp)) as usize] = Some(value(p));
        }
    }
    out
}

/// `slots` folded into at most WIDTH columns: summed (counts) or the highest (levels).
fn columns(values: &[Option<u64>], sum: bool) -> Vec<Option<u64>> {
    let per = values.len().div_ceil(WIDTH).max(1);
    values
        .chunks(per)
        .map(|c| {
            let known = c.iter().flatten();
            if c.iter().all(Option::is_none) {
                None
            } else if sum {
                Some(known.fold(0u64, |a, b| a.saturating_add(*b)))
            } else {
                known.max().copied()
            }
        })
        .collect()
}

/// A sparkline: a bar per column scaled to the highest, `·` where nothing was written.
fn spark(cols: &[Option<u64>]) -> String {
    let top = cols.iter().flatten().max().copied().unwrap_or(0);
    cols.iter()
        .map(|c| match c {
            None => '·',
            Some(_) if top == 0 => BARS[0],
            Some(v) => BARS[((u128::from(*v) * 7).div_ceil(u128::from(top))).min(7) as usize],
        })
        .collect()
}

fn ms_text(ms: u64) -> String {
    if ms >= 300_000 {
        "over 5m".into()
    } else {
        delayq_spec::duration::format_ms(ms)
    }
}

/// Each series on a line: its sparkline, then its total or its last and highest.
pub(crate) fn history_text(kind: Kind, h: &History, window: Duration) -> String {
    let per = if h.step.as_secs() == 60 {
        "min"
    } else {
        "hour"
    };
    let window_text = delayq_spec::duration::format_ms(window.as_millis() as u64);
    let mut out = format!(
        "{} {}: the last {window_text}, a point a {}{}",
        match kind {
            Kind::Group => "stream group",
            k => k.as_str(),
        },
        h.name,
        if per == "min" { "minute" } else { "hour" },
        if h.points.is_empty() {
            " (nothing written: no runtime ran it, or nothing happened and nothing waited)\n"
        } else {
            ", oldest left (· nothing written)\n"
        }
    );
    let count = |name: &str, f: &dyn Fn(&HistoryPoint) -> u64| {
        let cols = columns(&slots(h, window, f), true);
        let total = cols
            .iter()
            .flatten()
            .fold(0u64, |a, b| a.saturating_add(*b));
        format!("  {name:<16} {}  total {total}\n", spark(&cols))
    };
    let level = |name: &str, f: &dyn Fn(&HistoryPoint) -> u64, show: &dyn Fn(u64) -> String| {
        let cols = columns(&slots(h, window, f), false);
        let top = cols.iter().flatten().max().copied().unwrap_or(0);
        let last = cols.iter().rev().flatten().next().copied();
        format!(
            "  {name:<16} {}  last {}, highest {}\n",
            spark(&cols),
            last.map_or("-".into(), show),
            show(top)
        )
    };
    let plain = |v: u64| v.to_string();
    let lat = |q: fn(&HistoryPoint) -> Option<Duration>| {
        move |p: &HistoryPoint| q(p).map_or(0, |d| d.as_millis().min(300_000) as u64)
    };
    if kind == Kind::Room {
        out += &level("waiting", &|p| p.delayed, &plain);
        out += &level("inside", &|p| p.inflight, &plain);
        return out;
    }
    out += &count(&format!("handled/{per}"), &|p| p.ok);
    out += &count(&format!("retried/{per}"), &|p| p.retry);
    out += &count(&format!("dead/{per}"), &|p| p.dead);
    out += &count(&format!("timed out/{per}"), &|p| p.timed_out);
    out += &level("lateness p50 ≤", &lat(|p| p.lateness_p50), &ms_text);
    out += &level("lateness p99 ≤", &lat(|p| p.lateness_p99), &ms_text);
    match kind {
        Kind::Topic => {
            out += &level("delayed", &|p| p.delayed, &plain);
            out += &level("due", &|p| p.due, &plain);
            out += &level("in flight", &|p| p.inflight, &plain);
        }
        Kind::Group => {
            out += &level("lag", &|p| p.delayed, &plain);
            out += &level("pending", &|p| p.inflight, &plain);
        }
        Kind::Schedule | Kind::Room => {}
    }
    out
}
