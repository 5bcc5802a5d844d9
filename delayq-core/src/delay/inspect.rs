//! What the CLI and the dashboard read of a topic: a peek at pending messages (its statistics
//! are in stats.rs). Reads only, each call bounded.

use std::ops::Range;
use std::time::SystemTime;

use redis::Value;

use super::call::{invoke, on_topic};
use super::dead::{list_rows, parse_rows, Row, LIST_CHUNK};
use super::envelope::Envelope;
use super::keys::TopicKeys;
use super::scripts::{self, State};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;
use crate::time::ms_to_time;

/// Far buckets named in one call of `peek`'s walk.
const BUCKETS_PER_CALL: usize = 100;

/// A message waiting in `delayed` (or in flight), as `peek` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingMessage {
    /// The message id.
    pub id: MessageId,
    /// When it is due.
    pub due_at: SystemTime,
    /// Handler runs it has had.
    pub attempts: u32,
    /// The last handler error, if it failed before.
    pub last_error: Option<String>,
    /// When it was sent, if its envelope parses.
    pub enqueued_at: Option<SystemTime>,
    /// The payload (JSON as sent; the raw value when the envelope does not parse).
    pub payload: Vec<u8>,
}

/// A row of `list.lua` as `peek` shows it.
fn pending_message(row: Row) -> PendingMessage {
    let due_at = ms_to_time(row.score_ms);
    match row.raw.as_deref().map(Envelope::parse) {
        Some(Ok(e)) => PendingMessage {
            id: row.id,
            due_at,
            attempts: e.attempt,
            last_error: (!e.last_error.is_empty()).then_some(e.last_error),
            enqueued_at: Some(ms_to_time(e.enqueued_ms)),
            payload: e.payload,
        },
        _ => PendingMessage {
            id: row.id,
            due_at,
            attempts: 0,
            last_error: None,
            enqueued_at: None,
            payload: row.raw.unwrap_or_default(),
        },
    }
}

pub(super) fn bad(what: &'static str, detail: impl std::fmt::Debug) -> Error {
    Error::unexpected(what, &detail)
}

/// The operator's reads of API.md's "Operating it".
impl Producer {
    /// The delayed messages of `topic`, earliest due first, by index range (`0..20` for the
    /// next twenty). Nothing is claimed or changed.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call;
    /// [`Error::WrongType`](crate::Error::WrongType) when another program wrote a key delayq uses.
    pub async fn peek(&self, topic: &str, range: Range<usize>) -> Result<Vec<PendingMessage>> {
        let keys = self.keys(topic)?;
        let mut rows = list_rows(&self.conn, &keys, State::Delayed, range.clone()).await?;
        let want = range.len() - rows.len();
        if want > 0 {
            // Past the hot messages: the far buckets, in order, each walked in bounded steps.
            // The hot messages: those of `delayed` and, due, of `ready` (priorities).
            let (hot, ready): (usize, usize) = on_topic(&self.conn, &keys, |mut c| {
                let mut pipe = redis::pipe();
                pipe.zcard(&keys.delayed).zcard(&keys.ready);
                async move { pipe.query_async(&mut c).await }
            })
            .await?;
            let hot = hot + ready;
            let skip = range.start.saturating_sub(hot);
            rows.extend(self.far_rows(&keys, skip, want).await?);
        }
        Ok(rows.into_iter().map(pending_message).collect())
    }

    /// The far messages after the first `skip`, `want` of them, earliest due first: buckets
    /// are passed over by their size (`HLEN`) and the one the page reaches is walked with
    /// bounded `HSCAN` steps, keeping the earliest here, so no call reads a whole bucket.
    async fn far_rows(&self, keys: &TopicKeys, mut skip: usize, want: usize) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        let mut from = 0;
        while out.len() < want {
            let pipe_keys = keys.clone();
            let buckets: Vec<(String, usize)> = on_topic(&self.conn, keys, |mut c| async move {
                let buckets: Vec<String> = redis::cmd("ZRANGE")
                    .arg(&pipe_keys.far)
                    .arg(from)
                    .arg(from + BUCKETS_PER_CALL - 1)
                    .query_async(&mut c)
                    .await?;
                if buckets.is_empty() {
                    return Ok(Vec::new());
                }
                let mut sizes = redis::pipe();
                for b in &buckets {
                    sizes.hlen(format!("{}:{b}", pipe_keys.far));
                }
                let sizes: Vec<usize> = sizes.query_async(&mut c).await?;
                Ok(buckets.into_iter().zip(sizes).collect())
            })
            .await?;
            if buckets.is_empty() {
                break;
            }
            from += buckets.len();
            for (bucket, size) in buckets {
                if out.len() == want {
                    break;
                }
                if skip >= size {
                    skip -= size;
                    continue;
                }
                let earliest = self.earliest_in_bucket(keys, &bucket, skip + want - out.len());
                let earliest = earliest.await?;
                let left = want - out.len();
                out.extend(earliest.into_iter().skip(skip).take(left));
                skip = 0;
            }
        }
        Ok(out)
    }

    /// The `n` earliest messages of far bucket `bucket`, by due time, read in HSCAN steps.
    async fn earliest_in_bucket(
        &self,
        keys: &TopicKeys,
        bucket: &str,
        n: usize,
    ) -> Result<Vec<Row>> {
        let by_due =
            |a: &Row, b: &Row| (a.score_ms, a.id.as_str()).cmp(&(b.score_ms, b.id.as_str()));
        let mut kept: Vec<Row> = Vec::new();
        let mut cursor = "0".to_string();
        loop {
            let inv = scripts::list_far(keys, bucket, &cursor, LIST_CHUNK);
            let mut reply: Vec<Value> = invoke(&self.conn, keys, &inv).await?;
            if reply.is_empty() {
                return Err(bad("list far", "an empty reply"));
            }
            let rows = parse_rows(reply.split_off(1))?;
            cursor =
                redis::from_redis_value(reply.swap_remove(0)).map_err(|e| bad("list far", e))?;
            kept.extend(rows);
            if kept.len() > 2 * n.max(LIST_CHUNK) {
                kept.sort_unstable_by(by_due);
                kept.truncate(n);
            }
            if cursor == "0" {
                break;
            }
        }
        kept.sort_unstable_by(by_due);
        kept.truncate(n);
        Ok(kept)
    }
}
