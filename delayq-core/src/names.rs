//! The rules for names: topics, streams, rooms, leader tasks and namespaces, checked before
//! anything is written (a name becomes part of Redis keys).

use crate::error::{Error, Result};

/// Topic names: `delayq-macros` checks the same rule at compile time for
/// `#[delay_listener(topic = ...)]` (its values.rs); keep the two in step.
const MAX_TOPIC_LEN: usize = 128;
const MAX_NAMESPACE_LEN: usize = 64;

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

/// Why `name` breaks the topic rule, if it does.
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.len() > MAX_TOPIC_LEN {
        Some(format!("it is {} characters long", name.len()))
    } else {
        name.chars()
            .find(|c| !allowed(*c))
            .map(|c| format!("{c:?} is not allowed"))
    }
}

/// Checks a topic name: 1 to 128 characters from `[A-Za-z0-9._:-]`.
///
/// # Errors
/// [`Error::InvalidTopic`](crate::Error::InvalidTopic) saying what is wrong with it.
pub fn validate_topic(topic: &str) -> Result<()> {
    match name_problem(topic) {
        None => Ok(()),
        Some(reason) => Err(Error::InvalidTopic {
            topic: topic.to_string(),
            reason,
        }),
    }
}

/// Checks a stream, group or leader-task name (`kind`) by the topic rule.
pub fn validate_name(kind: &'static str, name: &str) -> Result<()> {
    match name_problem(name) {
        None => Ok(()),
        Some(reason) => Err(Error::InvalidName {
            kind,
            name: name.to_string(),
            reason,
        }),
    }
}

/// Checks a namespace: 1 to 64 characters from `[A-Za-z0-9._:-]`.
///
/// # Errors
/// [`Error::InvalidNamespace`](crate::Error::InvalidNamespace).
pub fn validate_namespace(namespace: &str) -> Result<()> {
    if namespace.is_empty()
        || namespace.len() > MAX_NAMESPACE_LEN
        || !namespace.chars().all(allowed)
    {
        return Err(Error::InvalidNamespace {
            namespace: namespace.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_checked() {
        for ok in ["a", "order.timeout", "A-Z_0:9", &"x".repeat(128)] {
            assert!(validate_topic(ok).is_ok(), "{ok}");
        }
        for bad in ["", "has space", "br{ace}", "ü", &"x".repeat(129), "a/b"] {
            let err = validate_topic(bad).unwrap_err().to_string();
            assert!(err.contains("invalid topic"), "{bad}: {err}");
        }
        assert!(validate_namespace("my-app").is_ok());
        assert!(validate_namespace("my{app}").is_err());
    }
}
