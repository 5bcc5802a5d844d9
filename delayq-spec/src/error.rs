//! What a check found wrong.

use std::fmt;

/// A value refused by one of the rules: the field at fault (`ack_timeout`, `cron hour`, `tz`)
/// and why, in words a user can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// What is at fault: an option's name, or a part of one (`cron day of week`).
    pub field: String,
    /// Why it is refused.
    pub reason: String,
}

impl SpecError {
    /// A refusal of `field` for `reason`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        SpecError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl std::error::Error for SpecError {}
