//! Message ids.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

const MAX_ID_LEN: usize = 256;

/// The id of a message: generated (a ULID of the message's due time: 26 characters, ordered
/// by due time, 80 random bits) or chosen by the user with
/// [`SendOptions::id`](crate::SendOptions::id), used as given.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(String);

impl MessageId {
    /// A fresh, unique, time-ordered id.
    pub fn generate() -> Self {
        // 26 characters: the id is stored with each message, so its length is memory.
        MessageId(ulid::Ulid::generate().to_string())
    }

    /// A fresh, unique id whose time is `due_unix_ms`, the message's due time as this machine
    /// expects it. The scripts read a far message's bucket from its id's time, so a generated
    /// id needs no index entry (see "Far buckets" in prelude.lua).
    pub(crate) fn for_due(due_unix_ms: u64) -> Self {
        MessageId(ulid::Ulid::from_datetime(crate::time::ms_to_time(due_unix_ms)).to_string())
    }

    /// A user-chosen id: 1 to 256 bytes, no control characters.
    ///
    /// # Errors
    /// [`Error::InvalidId`](crate::Error::InvalidId) saying what is wrong with it.
    pub fn new(id: impl Into<String>) -> Result<Self, Error> {
        let id = id.into();
        let reason = if id.is_empty() {
            "it is empty"
        } else if id.len() > MAX_ID_LEN {
            "it is longer than 256 bytes"
        } else if id.chars().any(char::is_control) {
            "it contains a control character"
        } else {
            return Ok(MessageId(id));
        };
        Err(Error::InvalidId {
            id,
            reason: reason.to_string(),
        })
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// An id read back from Redis; it was validated when it was written.
    pub(crate) fn from_stored(id: String) -> Self {
        MessageId(id)
    }
}

/// The unit separator: between a flow step message id's flow, step and gen. No user id holds
/// it (control characters are refused), so a flow step's message is known by its id.
pub(crate) const STEP_SEP: char = '\u{1f}';

/// Whether `id` is a flow step's message.
pub fn is_step_id(id: &str) -> bool {
    id.contains(STEP_SEP)
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for MessageId {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        MessageId::new(s)
    }
}

impl AsRef<str> for MessageId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_unique_and_ordered() {
        let a = MessageId::generate();
        let b = MessageId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 26);
        // Time-ordered across milliseconds (within one millisecond the order is random).
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(a < MessageId::generate() && b < MessageId::generate());
    }

    #[test]
    fn user_ids_are_checked() {
        assert_eq!("order-7".parse::<MessageId>().unwrap().as_str(), "order-7");
        assert!("".parse::<MessageId>().is_err());
        assert!("a\nb".parse::<MessageId>().is_err());
        assert!("x".repeat(257).parse::<MessageId>().is_err());
    }
}
