//! The rules for names: topics, streams, rooms, leader tasks and namespaces, checked before
//! anything is written (a name becomes part of Redis keys). The rule is `delayq-spec`'s, which
//! the attributes check at compile time.

use crate::error::{Error, Result};

use delayq_spec::{name_problem, namespace_ok};

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
    if !namespace_ok(namespace) {
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
