//! Dead letters as users see them.

use std::time::SystemTime;

use redis::Value;

use crate::envelope::{ms_to_time, Envelope};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::keys::TopicKeys;

/// A message that will not be delivered again unless replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The message id.
    pub id: MessageId,
    /// The raw payload (JSON as sent; the raw stored value when the envelope was corrupt).
    pub payload: Vec<u8>,
    /// Why it died.
    pub reason: String,
    /// Handler runs it had.
    pub attempts: u32,
    /// The last handler error, if any.
    pub last_error: Option<String>,
    /// When it was sent (None when the envelope was corrupt).
    pub enqueued_at: Option<SystemTime>,
    /// When it was due (None when the envelope was corrupt).
    pub due_at: Option<SystemTime>,
    /// When it died.
    pub died_at: SystemTime,
}

impl DeadLetter {
    /// Decodes the payload as JSON into `T`.
    pub fn payload_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.payload)
    }
}

fn bad(detail: impl std::fmt::Display) -> Error {
    Error::unexpected("dead_letters", &detail.to_string())
}

pub(crate) fn parse_page(keys: &TopicKeys, reply: Vec<Value>) -> Result<Vec<DeadLetter>> {
    let mut out = Vec::with_capacity(reply.len() / 3);
    let mut it = reply.into_iter();
    while let (Some(id), Some(died), Some(env)) = (it.next(), it.next(), it.next()) {
        let id: String = redis::from_redis_value(id).map_err(bad)?;
        let died: f64 = redis::from_redis_value(died).map_err(bad)?;
        let died_at = ms_to_time(died as u64);
        let raw: Option<Vec<u8>> = redis::from_redis_value(env).map_err(bad)?;
        let id = MessageId::from_stored(id);
        let letter = match raw.as_deref().map(Envelope::parse) {
            Some(Ok(e)) => DeadLetter {
                id,
                reason: e.dead_reason,
                attempts: e.attempt,
                last_error: (!e.last_error.is_empty()).then_some(e.last_error),
                enqueued_at: Some(ms_to_time(e.enqueued_ms)),
                due_at: Some(ms_to_time(e.due_ms)),
                died_at,
                payload: e.payload,
            },
            Some(Err(why)) => DeadLetter {
                reason: format!("the envelope in {} does not parse: {why}", keys.msg),
                id,
                payload: raw.unwrap_or_default(),
                attempts: 0,
                last_error: None,
                enqueued_at: None,
                due_at: None,
                died_at,
            },
            None => DeadLetter {
                reason: format!("the envelope is missing from {}", keys.msg),
                id,
                payload: Vec::new(),
                attempts: 0,
                last_error: None,
                enqueued_at: None,
                due_at: None,
                died_at,
            },
        };
        out.push(letter);
    }
    Ok(out)
}
