//! Parsing replies in place: the entries of an `XREADGROUP` or a take-over, and field values.

use std::sync::Arc;

use redis::Value;

use super::keys::{PAYLOAD_FIELD, REPLAY_FOR_FIELD};
use crate::error::{Error, Result};

/// An entry as a consumer receives it.
#[derive(Debug, Clone)]
pub struct StreamEntry {
    /// The entry id (`<ms>-<seq>`), shared by a delivery's lease, books and ack.
    pub id: Arc<str>,
    /// The `payload` field, if the entry has one.
    pub payload: Option<Vec<u8>>,
    /// Deliveries to the group so far, this one included (1 on the first).
    pub deliveries: u32,
    /// For a replayed dead letter: the group it is meant for.
    pub replay_for: Option<String>,
}

impl StreamEntry {
    /// An entry from its id and its field list as Redis sends it (`field value …`; a map in
    /// RESP3; nil for an entry deleted since), taking the values' bytes rather than copying.
    pub(super) fn from_reply(id: &Value, fields: Value) -> Option<Self> {
        let mut entry = StreamEntry {
            id: std::str::from_utf8(value_str(id)?).ok()?.into(),
            payload: None,
            deliveries: 1,
            replay_for: None,
        };
        let mut take = |name: Value, value: Value| match value_str(&name) {
            Some(n) if n == PAYLOAD_FIELD.as_bytes() => entry.payload = value_into_bytes(value),
            Some(n) if n == REPLAY_FOR_FIELD.as_bytes() => {
                entry.replay_for = value_into_bytes(value).and_then(|b| String::from_utf8(b).ok())
            }
            _ => {}
        };
        match fields {
            Value::Array(items) => {
                let mut items = items.into_iter();
                while let (Some(name), Some(value)) = (items.next(), items.next()) {
                    take(name, value);
                }
            }
            Value::Map(pairs) => pairs.into_iter().for_each(|(n, v)| take(n, v)),
            _ => {}
        }
        Some(entry)
    }
}

/// The entries of an `XREADGROUP` reply (nil, or per stream its name and `[id, fields]`
/// pairs; a map of streams in RESP3), parsed in place: a decoded `StreamReadReply` built a
/// map per entry and copied each payload twice on the way.
pub(super) fn read_entries(reply: Value) -> Result<Vec<StreamEntry>> {
    let streams: Vec<Value> = match reply {
        Value::Nil => return Ok(Vec::new()),
        Value::Array(items) => items
            .into_iter()
            .filter_map(|s| match s {
                Value::Array(kv) => kv.into_iter().nth(1),
                _ => None,
            })
            .collect(),
        Value::Map(pairs) => pairs.into_iter().map(|(_, v)| v).collect(),
        other => return Err(Error::unexpected("XREADGROUP", &other)),
    };
    let mut entries = Vec::new();
    for list in streams {
        let Value::Array(list) = list else { continue };
        entries.reserve(list.len());
        for item in list {
            let parts = match item {
                Value::Array(parts) => <[Value; 2]>::try_from(parts).map_err(Value::Array),
                other => Err(other),
            };
            let [id, fields] =
                parts.map_err(|other| Error::unexpected("XREADGROUP entry", &other))?;
            let entry = StreamEntry::from_reply(&id, fields)
                .ok_or_else(|| Error::unexpected("XREADGROUP entry id", &id))?;
            entries.push(entry);
        }
    }
    Ok(entries)
}

/// A string value's bytes, borrowed.
fn value_str(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// [`value_bytes`], taking the value's own buffer rather than copying it.
fn value_into_bytes(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

/// A field value (or a script's reply item) as bytes: strings and integers.
pub(crate) fn value_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => value_str(v).map(<[u8]>::to_vec),
    }
}

pub(super) fn text(v: &Value) -> Option<String> {
    String::from_utf8(value_bytes(v)?).ok()
}

pub(super) fn array(v: &Value) -> &[Value] {
    match v {
        Value::Array(items) => items,
        _ => &[],
    }
}
