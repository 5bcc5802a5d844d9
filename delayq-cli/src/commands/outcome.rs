//! What every command shares: its outcome, how it prints (tables for people with control
//! characters escaped, exact JSON for scripts), and the checks of its arguments.

use delayq_core::{MessageId, Producer};
use serde_json::Value;

use crate::failure::Failure;
use crate::namespace::Entry;
use crate::report;

pub(super) type Outcome = Result<(), Failure>;

/// What a command prints: JSON for `--json` (exact), else the table (or line) people read,
/// with control characters escaped (`report::printable_lines`). Fails (exit 1) when stdout
/// cannot be written.
pub(super) fn emit(json: bool, value: Value, human: impl FnOnce() -> String) -> Outcome {
    let text = if json {
        value.to_string()
    } else {
        report::printable_lines(&human()).into_owned()
    };
    crate::output::line(&text)
}

/// Fails (exit 1) unless `topic` is registered in the namespace: a typo should not look
/// like an empty topic.
pub(super) async fn known_topic(p: &Producer, topic: &str) -> Outcome {
    delayq_core::validate_topic(topic)?;
    let topics = p.topics().await?;
    if topics.iter().any(|t| t == topic) {
        return Ok(());
    }
    let known = if topics.is_empty() {
        "none yet".to_string()
    } else {
        topics.join(", ")
    };
    Err(Failure::Failed(format!(
        "no topic {topic:?} in namespace {:?} (known: {known}); check the name, or --namespace / DELAYQ_NAMESPACE",
        p.namespace()
    )))
}

pub(super) fn message_id(id: &str) -> Result<MessageId, Failure> {
    Ok(MessageId::new(id)?)
}

/// Warns on stderr how many entries could not be read (their rows say why).
pub(super) fn warn_unreadable<T>(entries: &[Entry<T>], what: &str) {
    let bad = entries.iter().filter(|e| e.read.is_err()).count();
    if bad > 0 {
        eprintln!("warning: {bad} {what} could not be read (see their rows)");
    }
}
