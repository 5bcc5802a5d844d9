//! The producer's side of streams: publishing entries, and the dead letters of a group.

use std::ops::Range;
use std::time::SystemTime;

use redis::streams::StreamRangeReply;
use redis::Value;
use serde::Serialize;

use super::group::StreamGroup;
use super::keys::{dead_stream, PAYLOAD_FIELD};
use super::reply::value_bytes;
use crate::catalog::Registered;
use crate::error::{Error, Result};
use crate::names::validate_name;
use crate::producer::Producer;
use crate::time::ms_to_time;

/// Dead letters read per `XRANGE` while paging through a dead-letter stream.
const DEAD_PAGE: usize = 1_000;

/// Options of [`Producer::publish_with`].
#[derive(Debug, Clone, Default)]
pub struct PublishOptions {
    max_len: Option<u64>,
}

impl PublishOptions {
    /// No options: the stream is not trimmed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trims the stream to about `n` entries as this one is added (`MAXLEN ~ n`: Redis trims
    /// whole nodes, so a few more may stay). Trimming deletes entries that a slow group may
    /// not have read yet.
    pub fn max_len(mut self, n: u64) -> Self {
        self.max_len = Some(n);
        self
    }
}

/// An entry a group gave up on: written to `{<stream>}:dead` after `max_deliveries`, a
/// payload that does not decode, or `Ack::dead_letter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamDeadLetter {
    /// Its id in the dead-letter stream (what [`Producer::replay_stream_dead`] takes).
    pub dead_id: String,
    /// The id the entry had in its stream.
    pub entry_id: String,
    /// The group that gave up on it.
    pub group: String,
    /// How often it was delivered to the group.
    pub deliveries: u32,
    /// Why.
    pub reason: String,
    /// The entry's `payload` field (empty when it had none).
    pub payload: Vec<u8>,
    /// When it was dead-lettered (Redis' clock).
    pub died_at: SystemTime,
}

fn field(map: &std::collections::HashMap<String, Value>, name: &str) -> Vec<u8> {
    map.get(name).and_then(value_bytes).unwrap_or_default()
}

fn field_text(map: &std::collections::HashMap<String, Value>, name: &str) -> String {
    String::from_utf8_lossy(&field(map, name)).into_owned()
}

impl Producer {
    /// Adds `payload` (as JSON in the field `payload`) to `stream`; the new entry's id.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName); [`Error::Encode`](crate::Error::Encode);
    /// [`Error::PayloadTooLarge`](crate::Error::PayloadTooLarge);
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    /// Nothing is published on any of them.
    pub async fn publish<T: Serialize + ?Sized>(
        &self,
        stream: &str,
        payload: &T,
    ) -> Result<String> {
        self.publish_with(stream, payload, PublishOptions::new())
            .await
    }

    /// [`publish`](Self::publish) with options.
    ///
    /// # Errors
    /// As [`publish`](Self::publish).
    pub async fn publish_with<T: Serialize + ?Sized>(
        &self,
        stream: &str,
        payload: &T,
        options: PublishOptions,
    ) -> Result<String> {
        validate_name("stream", stream)?;
        let bytes = self.encode(payload)?;
        self.register(Registered::Stream, stream).await?;
        let mut cmd = redis::cmd("XADD");
        cmd.arg(stream);
        if let Some(n) = options.max_len {
            cmd.arg("MAXLEN").arg("~").arg(n);
        }
        cmd.arg("*").arg(PAYLOAD_FIELD).arg(bytes);
        Ok(self
            .conn
            .run(|mut c| async move { cmd.query_async(&mut c).await })
            .await?)
    }

    /// The dead letters of `group` on `stream`, oldest first; `range` indexes them.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName); [`Error::Redis`](crate::Error::Redis)
    /// when Redis does not answer or refuses the call.
    pub async fn stream_dead_letters(
        &self,
        stream: &str,
        group: &str,
        range: Range<usize>,
    ) -> Result<Vec<StreamDeadLetter>> {
        validate_name("stream", stream)?;
        validate_name("group", group)?;
        let key = dead_stream(stream);
        let (mut out, mut seen, mut start) = (Vec::new(), 0usize, "-".to_string());
        while out.len() < range.len() {
            let mut cmd = redis::cmd("XRANGE");
            cmd.arg(&key)
                .arg(&start)
                .arg("+")
                .arg("COUNT")
                .arg(DEAD_PAGE);
            let page: StreamRangeReply = self
                .conn
                .run(|mut c| async move { cmd.query_async(&mut c).await })
                .await?;
            let Some(last) = page.ids.last() else { break };
            start = format!("({}", last.id);
            let full = page.ids.len() == DEAD_PAGE;
            for e in page.ids {
                if field_text(&e.map, "group") != group {
                    continue;
                }
                seen += 1;
                if seen <= range.start || out.len() >= range.len() {
                    continue;
                }
                let died_ms =
                    e.id.split('-')
                        .next()
                        .and_then(|ms| ms.parse().ok())
                        .ok_or_else(|| Error::unexpected("XRANGE", &e.id))?;
                out.push(StreamDeadLetter {
                    entry_id: field_text(&e.map, "id"),
                    group: group.to_string(),
                    deliveries: field_text(&e.map, "deliveries").parse().unwrap_or(0),
                    reason: field_text(&e.map, "reason"),
                    payload: field(&e.map, "payload"),
                    died_at: ms_to_time(died_ms),
                    dead_id: e.id,
                });
            }
            if !full {
                break;
            }
        }
        Ok(out)
    }

    /// Puts dead letter `dead_id` of `group` back: its payload becomes a new entry of
    /// `stream` that only `group` handles (delayq listeners of other groups ack it without
    /// running; a consumer outside delayq sees it as a new entry). The new entry's id, or
    /// `None` when `group` has no such dead letter.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName); [`Error::Redis`](crate::Error::Redis)
    /// when Redis does not answer or refuses the call.
    pub async fn replay_stream_dead(
        &self,
        stream: &str,
        group: &str,
        dead_id: &str,
    ) -> Result<Option<String>> {
        StreamGroup::new(self.conn.clone(), stream, group, "producer")?
            .replay_dead(dead_id)
            .await
    }
}
