//! What the commands and the dashboard show, in the two forms they show it: JSON values
//! (`--json` and the dashboard's API share them) and table rows.

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comfy_table::{presets::NOTHING, ContentArrangement, Table};
use delayq_core::{DeadLetter, PendingMessage, RoomCounts, StreamStats, TopicStats};
use serde_json::{json, Value};

/// Milliseconds since the epoch, for JSON.
pub(crate) fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn ms_opt(t: Option<SystemTime>) -> Value {
    t.map_or(Value::Null, |t| json!(ms(t)))
}

/// `in 4m 3s`, `12s ago` or `now`, to the second.
pub(crate) fn relative(t: SystemTime, now: SystemTime) -> String {
    let secs =
        |d: Duration| humantime::format_duration(Duration::from_secs(d.as_secs())).to_string();
    match t.duration_since(now) {
        Ok(ahead) if ahead.as_secs() > 0 => format!("in {}", secs(ahead)),
        Ok(_) => "now".to_string(),
        Err(e) if e.duration().as_secs() == 0 => "now".to_string(),
        Err(e) => format!("{} ago", secs(e.duration())),
    }
}

fn relative_opt(t: Option<SystemTime>, now: SystemTime) -> String {
    t.map_or_else(|| "-".to_string(), |t| relative(t, now))
}

/// A payload as JSON when it is JSON, else as a string.
fn payload_value(raw: &[u8]) -> Value {
    serde_json::from_slice(raw)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(raw).into_owned()))
}

/// A payload on one table line, cut at `max` characters.
fn payload_short(raw: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(raw);
    if text.chars().count() <= max {
        return text.into_owned();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// Whether `c` must not reach a terminal as it is: a control character (C0, DEL, C1: cursor
/// moves, screen clears, window titles, OSC 8 links…) or a bidirectional override, which
/// reorders what is shown ("Trojan Source").
fn unprintable(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every unprintable character shown as an escape (`\x1b`, `\n`, `\u{202e}`),
/// so that what a message, an error or a key name carries is read, never obeyed, by the
/// terminal. Everything people read goes through this; `--json` stays exact.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    escape(text, unprintable)
}

/// [`printable`], keeping line breaks: for whole lines of output.
pub(crate) fn printable_lines(text: &str) -> Cow<'_, str> {
    escape(text, |c| c != '\n' && unprintable(c))
}

fn escape(text: &str, shown_escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&shown_escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !shown_escaped(c) {
            out.push(c);
        } else if c == '\n' {
            out.push_str("\\n");
        } else if c == '\t' {
            out.push_str("\\t");
        } else if c == '\r' {
            out.push_str("\\r");
        } else if (c as u32) < 0x100 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

/// A table for people: every cell added goes through [`printable`].
pub(crate) struct Report(Table);

impl Report {
    pub(crate) fn add_row(&mut self, cells: Vec<String>) {
        self.0
            .add_row(cells.iter().map(|c| printable(c).into_owned()));
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

pub(crate) fn table(header: &[&str]) -> Report {
    let mut t = Table::new();
    t.load_style(NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().copied());
    Report(t)
}

/// A row for a registry entry that could not be read: its name, then the error.
pub(crate) fn error_row(name: &str, error: &str, columns: usize) -> Vec<String> {
    let mut row = vec![name.to_string(), format!("cannot read: {error}")];
    row.resize(columns.max(2), "-".to_string());
    row
}

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
        },
        "read_at_ms": ms(s.read_at),
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
];

pub(crate) fn stats_row(s: &TopicStats) -> Vec<String> {
    vec![
        s.topic.clone(),
        s.delayed.to_string(),
        s.inflight.to_string(),
        s.dead.to_string(),
        relative_opt(s.next_due, s.read_at),
        relative_opt(s.oldest_claim_deadline, s.read_at),
        s.last_minute.ok.to_string(),
        s.last_minute.retry.to_string(),
        s.last_minute.dead.to_string(),
    ]
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
    let head = [s.stream.clone(), s.length.to_string(), s.dead.to_string()];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times_read_naturally() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(relative(now + Duration::from_millis(4_500), now), "in 4s");
        assert_eq!(relative(now - Duration::from_secs(90), now), "1m 30s ago");
        assert_eq!(relative(now + Duration::from_millis(300), now), "now");
        assert_eq!(relative(now - Duration::from_millis(300), now), "now");
    }

    #[test]
    fn what_reaches_a_terminal_has_no_control_characters() {
        let hostile = "boom\u{1b}]0;owned\u{7}\u{1b}[2J\r\n\u{202e}txt.exe\u{9b}";
        let shown = printable(hostile);
        assert_eq!(
            shown,
            "boom\\x1b]0;owned\\x07\\x1b[2J\\r\\n\\u{202e}txt.exe\\x9b"
        );
        assert!(!shown.chars().any(unprintable));
        assert_eq!(printable_lines("a\nb\u{1b}"), "a\nb\\x1b");
        assert!(matches!(printable("plain · text"), Cow::Borrowed(_)));
        let mut t = table(&["A", "B"]);
        t.add_row(vec!["x\u{1b}[31m".into(), "y".into()]);
        assert!(!t.to_string().contains('\u{1b}'), "{t}");
    }

    #[test]
    fn payloads_are_cut_for_tables_and_kept_as_json() {
        assert_eq!(payload_short(b"abcdef", 4), "abc…");
        assert_eq!(payload_short(b"abc", 4), "abc");
        assert_eq!(payload_value(b"{\"a\":1}"), json!({"a": 1}));
        assert_eq!(payload_value(b"not json"), json!("not json"));
    }
}
