//! The forms every view shares: times (absolute and relative), payloads cut for a table, text
//! made safe for a terminal, and tables.

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comfy_table::{presets::NOTHING, ContentArrangement, Table};
use serde_json::{json, Value};

/// Milliseconds since the epoch, for JSON.
pub(crate) fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(super) fn ms_opt(t: Option<SystemTime>) -> Value {
    t.map_or(Value::Null, |t| json!(ms(t)))
}

/// `in 4m3s`, `12s ago` or `now`, to the second; the duration as `--delay` and `delayq.toml`
/// read it.
pub(crate) fn relative(t: SystemTime, now: SystemTime) -> String {
    let secs = |d: Duration| delayq_spec::duration::format_ms(d.as_secs().saturating_mul(1_000));
    match t.duration_since(now) {
        Ok(ahead) if ahead.as_secs() > 0 => format!("in {}", secs(ahead)),
        Ok(_) => "now".to_string(),
        Err(e) if e.duration().as_secs() == 0 => "now".to_string(),
        Err(e) => format!("{} ago", secs(e.duration())),
    }
}

pub(super) fn relative_opt(t: Option<SystemTime>, now: SystemTime) -> String {
    t.map_or_else(|| "-".to_string(), |t| relative(t, now))
}

/// A payload as JSON when it is JSON, else as a string.
pub(super) fn payload_value(raw: &[u8]) -> Value {
    serde_json::from_slice(raw)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(raw).into_owned()))
}

/// A payload on one table line, cut at `max` characters.
pub(super) fn payload_short(raw: &[u8], max: usize) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times_read_naturally() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(relative(now + Duration::from_millis(4_500), now), "in 4s");
        assert_eq!(relative(now - Duration::from_secs(90), now), "1m30s ago");
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
