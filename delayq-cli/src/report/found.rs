//! `delayq find` and the dashboard's search: where one message is, as JSON and field by field.

use std::time::SystemTime;

use delayq_core::{FoundMessage, MessageId, Place};
use serde_json::{json, Value};

use crate::failure::Failure;

use super::text::{ms, ms_opt, payload_value, relative, relative_opt, table, Report};

/// The place's name and the time that goes with it.
fn place_parts(p: &Place) -> (&'static str, Option<SystemTime>) {
    match p {
        Place::Delayed { due_at } => ("delayed", Some(*due_at)),
        Place::InFlight { deadline } => ("inflight", Some(*deadline)),
        Place::Dead { died_at, .. } => ("dead", Some(*died_at)),
        Place::Finished { reserved_until } => ("finished", Some(*reserved_until)),
        Place::Unknown => ("unknown", None),
    }
}

pub(crate) fn found_json(topic: &str, f: &FoundMessage) -> Value {
    let (place, at) = place_parts(&f.place);
    let mut v = json!({
        "topic": topic,
        "id": f.id.as_str(),
        "place": place,
        "attempts": f.attempts,
        "last_error": f.last_error,
        "enqueued_ms": ms_opt(f.enqueued_at),
        "due_ms": ms_opt(f.due_at),
        "payload": if f.payload.is_empty() { Value::Null } else { payload_value(&f.payload) },
    });
    let at = at.map(ms);
    match &f.place {
        Place::Delayed { .. } => v["due_ms"] = json!(at),
        Place::InFlight { .. } => v["claim_deadline_ms"] = json!(at),
        Place::Dead { reason, .. } => {
            v["died_ms"] = json!(at);
            v["reason"] = json!(reason);
        }
        Place::Finished { .. } => v["reserved_until_ms"] = json!(at),
        Place::Unknown => {}
    }
    if let Some(why) = &f.unreadable {
        v["unreadable"] = json!(why);
    }
    v
}

/// Field by field, the place first in words a person reads at 3 a.m.
pub(crate) fn found_detail(topic: &str, f: &FoundMessage, now: SystemTime) -> Report {
    let mut t = table(&["FIELD", "VALUE"]);
    let mut row = |k: &str, v: String| t.add_row(vec![k.to_string(), v]);
    row("topic", topic.to_string());
    row("id", f.id.to_string());
    let place = match &f.place {
        Place::Delayed { due_at } => format!("delayed, due {}", relative(*due_at, now)),
        Place::InFlight { deadline } => format!(
            "in flight (attempt {}), claim ends {}",
            f.attempts,
            relative(*deadline, now)
        ),
        Place::Dead { died_at, reason } => {
            format!("dead {}: {reason}", relative(*died_at, now))
        }
        Place::Finished { reserved_until } => format!(
            "finished; its id is reserved (dedup_for) until {}",
            relative(*reserved_until, now)
        ),
        Place::Unknown => "unknown: never sent, or acknowledged, cancelled or purged".to_string(),
    };
    row("where", place);
    if matches!(f.place, Place::Finished { .. } | Place::Unknown) {
        return t;
    }
    row("attempts", f.attempts.to_string());
    row(
        "last error",
        f.last_error.clone().unwrap_or_else(|| "-".into()),
    );
    row("sent", relative_opt(f.enqueued_at, now));
    row("due", relative_opt(f.due_at, now));
    if let Some(why) = &f.unreadable {
        row("unreadable", why.clone());
    }
    row("payload", String::from_utf8_lossy(&f.payload).into_owned());
    t
}

/// What `find` answers for an id the topic does not have (CLI exit 1, dashboard 404).
pub(crate) fn not_found(topic: &str, id: &MessageId) -> Failure {
    Failure::NotFound(format!(
        "{id} is not on {topic}: never sent, or acknowledged, cancelled or purged"
    ))
}
