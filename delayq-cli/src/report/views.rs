//! Each kind of thing the commands and the dashboard show, as a JSON value (`--json` and the
//! dashboard's API share them) and as table rows.

use std::time::SystemTime;

use delayq_core::{DeadLetter, PendingMessage, RoomCounts, ScheduleInfo, StreamStats, TopicStats};
use serde_json::{json, Value};

use super::text::{
    ms, ms_opt, payload_short, payload_value, relative, relative_opt, table, Report,
};

pub(crate) fn stats_json(s: &TopicStats) -> Value {
    json!({
        "topic": s.topic,
        "delayed": s.delayed,
        "inflight": s.inflight,
        "dead": s.dead,
        "next_due_ms": ms_opt(s.next_due),
        "oldest_claim_deadline_ms": ms_opt(s.oldest_claim_deadline),
        "last_minute": {
            "ok": s.last_minute.ok,
            "retry": s.last_minute.retry,
            "dead": s.last_minute.dead,
            "timed_out": s.last_minute.timed_out,
        },
        "read_at_ms": ms(s.read_at),
        "paused": s.paused,
        "dead_dropped": s.dead_dropped,
        "rate": s.rate,
    })
}

pub(crate) const STATS_HEADER: &[&str] = &[
    "TOPIC",
    "DELAYED",
    "IN FLIGHT",
    "DEAD",
    "NEXT DUE",
    "OLDEST CLAIM (DEADLINE)",
    "OK/MIN",
    "RETRY/MIN",
    "DEAD/MIN",
    "TIMED OUT/MIN",
];

pub(crate) fn stats_row(s: &TopicStats) -> Vec<String> {
    vec![
        match (&s.rate, s.paused) {
            (Some(rate), true) => format!("{} (paused, {rate})", s.topic),
            (Some(rate), false) => format!("{} ({rate})", s.topic),
            (None, true) => format!("{} (paused)", s.topic),
            (None, false) => s.topic.clone(),
        },
        s.delayed.to_string(),
        s.inflight.to_string(),
        dead_cell(s.dead as u64, s.dead_dropped),
        relative_opt(s.next_due, s.read_at),
        relative_opt(s.oldest_claim_deadline, s.read_at),
        s.last_minute.ok.to_string(),
        s.last_minute.retry.to_string(),
        s.last_minute.dead.to_string(),
        s.last_minute.timed_out.to_string(),
    ]
}

/// Dead letters, with those dropped past the bounds when there were any: `12 (7 dropped)`.
fn dead_cell(dead: u64, dropped: u64) -> String {
    if dropped > 0 {
        format!("{dead} ({dropped} dropped)")
    } else {
        dead.to_string()
    }
}

pub(crate) fn pending_json(m: &PendingMessage) -> Value {
    json!({
        "id": m.id.as_str(),
        "due_ms": ms(m.due_at),
        "attempts": m.attempts,
        "last_error": m.last_error,
        "enqueued_ms": ms_opt(m.enqueued_at),
        "payload": payload_value(&m.payload),
    })
}

pub(crate) const PEEK_HEADER: &[&str] = &["ID", "DUE", "ATTEMPTS", "LAST ERROR", "PAYLOAD"];

pub(crate) fn pending_row(m: &PendingMessage, now: SystemTime) -> Vec<String> {
    vec![
        m.id.to_string(),
        relative(m.due_at, now),
        m.attempts.to_string(),
        m.last_error.clone().unwrap_or_else(|| "-".into()),
        payload_short(&m.payload, 60),
    ]
}

pub(crate) fn dead_json(d: &DeadLetter) -> Value {
    json!({
        "id": d.id.as_str(),
        "reason": d.reason,
        "attempts": d.attempts,
        "last_error": d.last_error,
        "enqueued_ms": ms_opt(d.enqueued_at),
        "due_ms": ms_opt(d.due_at),
        "died_ms": ms(d.died_at),
        "payload": payload_value(&d.payload),
    })
}

pub(crate) const DEAD_HEADER: &[&str] = &["ID", "DIED", "ATTEMPTS", "REASON", "PAYLOAD"];

pub(crate) fn dead_row(d: &DeadLetter, now: SystemTime) -> Vec<String> {
    vec![
        d.id.to_string(),
        relative(d.died_at, now),
        d.attempts.to_string(),
        d.reason.clone(),
        payload_short(&d.payload, 40),
    ]
}

/// One dead letter, field by field, for `dead show`.
pub(crate) fn dead_detail(d: &DeadLetter, now: SystemTime) -> Report {
    let mut t = table(&["FIELD", "VALUE"]);
    let when = |t: Option<SystemTime>| relative_opt(t, now);
    t.add_row(vec!["id".to_string(), d.id.to_string()]);
    t.add_row(vec!["reason".to_string(), d.reason.clone()]);
    t.add_row(vec!["attempts".to_string(), d.attempts.to_string()]);
    t.add_row(vec![
        "last error".to_string(),
        d.last_error.clone().unwrap_or_else(|| "-".into()),
    ]);
    t.add_row(vec!["sent".to_string(), when(d.enqueued_at)]);
    t.add_row(vec!["due".to_string(), when(d.due_at)]);
    t.add_row(vec!["died".to_string(), when(Some(d.died_at))]);
    t.add_row(vec![
        "payload".to_string(),
        String::from_utf8_lossy(&d.payload).into_owned(),
    ]);
    t
}

pub(crate) fn stream_json(s: &StreamStats) -> Value {
    json!({
        "stream": s.stream,
        "length": s.length,
        "dead": s.dead,
        "dead_dropped": s.dead_dropped,
        "groups": s.groups.iter().map(|g| json!({
            "group": g.group,
            "consumers": g.consumers,
            "pending": g.pending,
            "lag": g.lag,
        })).collect::<Vec<_>>(),
    })
}

pub(crate) const STREAMS_HEADER: &[&str] = &[
    "STREAM",
    "LENGTH",
    "DEAD",
    "GROUP",
    "CONSUMERS",
    "PENDING",
    "LAG",
];

/// One row per group (a stream without groups gets one row of its own).
pub(crate) fn stream_rows(s: &StreamStats) -> Vec<Vec<String>> {
    let head = [
        s.stream.clone(),
        s.length.to_string(),
        dead_cell(s.dead, s.dead_dropped),
    ];
    if s.groups.is_empty() {
        let mut row = head.to_vec();
        row.extend(["-", "-", "-", "-"].map(String::from));
        return vec![row];
    }
    s.groups
        .iter()
        .map(|g| {
            let mut row = head.to_vec();
            row.extend([
                g.group.clone(),
                g.consumers.to_string(),
                g.pending.to_string(),
                g.lag.map_or_else(|| "-".into(), |l| l.to_string()),
            ]);
            row
        })
        .collect()
}

pub(crate) fn room_json(name: &str, c: &RoomCounts) -> Value {
    json!({ "room": name, "waiting": c.waiting, "active": c.active })
}

pub(crate) const ROOMS_HEADER: &[&str] = &["ROOM", "WAITING", "ACTIVE"];

pub(crate) fn room_row(name: &str, c: &RoomCounts) -> Vec<String> {
    vec![
        name.to_string(),
        c.waiting.to_string(),
        c.active.to_string(),
    ]
}

pub(crate) fn schedule_json(s: &ScheduleInfo) -> Value {
    json!({
        "schedule": s.name,
        "spec": s.spec,
        "tz": s.tz,
        "topic": s.topic,
        "catch_up": s.catch_up.as_str(),
        "next_at_ms": ms_opt(s.next_at),
        "last_at_ms": ms_opt(s.last_at),
        "last_outcome": s.last_outcome.map(|o| o.as_str()),
        "from_code": s.from_code,
        "stalled": s.stalled,
        "suspended": s.suspended,
    })
}

pub(crate) const SCHEDULES_HEADER: &[&str] = &[
    "SCHEDULE", "SPEC", "TZ", "TOPIC", "NEXT", "LAST", "OUTCOME", "CATCH UP",
];

pub(crate) fn schedule_row(s: &ScheduleInfo, now: SystemTime) -> Vec<String> {
    vec![
        s.name.clone(),
        s.spec.clone(),
        s.tz.clone(),
        s.topic.clone(),
        if s.suspended {
            "suspended".to_string()
        } else if s.stalled {
            format!("{} (stalled)", relative_opt(s.next_at, now))
        } else {
            relative_opt(s.next_at, now)
        },
        relative_opt(s.last_at, now),
        s.last_outcome.map_or("-", |o| o.as_str()).to_string(),
        s.catch_up.as_str().to_string(),
    ]
}
