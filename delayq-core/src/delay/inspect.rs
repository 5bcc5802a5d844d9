//! What the CLI and the dashboard read of a topic: its statistics and a peek at pending
//! messages. Reads only; every number comes from a counter the scripts keep or
//! from the size of a known key, never from a scan.

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

/// The width of the outcome buckets `prelude.lua` keeps (its `STATS_BUCKET_MS`).
const STATS_BUCKET_MS: u64 = 10_000;
/// Far buckets named in one call of `peek`'s walk.
const BUCKETS_PER_CALL: usize = 100;

/// Outcomes of handler runs over about the last minute (the buckets that overlap the last
/// 60 s, so 60 to 70 s).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcomes {
    /// Acknowledged.
    pub ok: u64,
    /// Failed (or their ack deadline passed) and scheduled again.
    pub retry: u64,
    /// Moved to the dead letters.
    pub dead: u64,
}

/// The state of one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicStats {
    /// The topic.
    pub topic: String,
    /// Waiting for their due time, or due and not yet claimed.
    pub delayed: usize,
    /// Claimed by a consumer and not acknowledged.
    pub inflight: usize,
    /// In the dead letters.
    pub dead: usize,
    /// The earliest due time among the delayed messages.
    pub next_due: Option<SystemTime>,
    /// The earliest ack deadline among the in-flight messages: the claim renewed least
    /// recently, which is where a stuck consumer shows first.
    pub oldest_claim_deadline: Option<SystemTime>,
    /// Outcomes over about the last minute.
    pub last_minute: Outcomes,
    /// The Redis server's clock when the numbers were read.
    pub read_at: SystemTime,
    /// Whether the topic is paused (`Producer::pause`): no process claims its messages.
    pub paused: bool,
    /// Dead letters dropped in all, oldest first, past the topic's `dead_max` or `dead_ttl`.
    pub dead_dropped: u64,
    /// The rate limit its listeners claim within (`100/s burst 10`), as the last runtime to
    /// start with the topic announced it; `None` when unlimited.
    pub rate: Option<String>,
}

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

fn bad(what: &'static str, detail: impl std::fmt::Debug) -> Error {
    Error::unexpected(what, &detail)
}

fn first_score(v: &[(String, f64)]) -> Option<SystemTime> {
    v.first().map(|(_, s)| ms_to_time(*s as u64))
}

/// Sums the buckets of `fields` (`<outcome>:<bucket>` → count) that overlap the minute
/// before `now_ms`.
fn last_minute(fields: &[(String, u64)], now_ms: u64) -> Outcomes {
    let first_bucket = now_ms.saturating_sub(60_000) / STATS_BUCKET_MS;
    let mut out = Outcomes::default();
    for (field, n) in fields {
        let Some((outcome, bucket)) = field.split_once(':') else {
            continue;
        };
        if bucket.parse::<u64>().is_ok_and(|b| b >= first_bucket) {
            match outcome {
                "ok" => out.ok += n,
                "retry" => out.retry += n,
                "dead" => out.dead += n,
                _ => {}
            }
        }
    }
    out
}

/// The operator's reads of API.md's "Operating it".
impl Producer {
    /// The counts, heads and last-minute outcomes of `topic`, read in one round trip.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn topic_stats(&self, topic: &str) -> Result<TopicStats> {
        let keys = self.keys(topic)?;
        let mut pipe = redis::pipe();
        pipe.zcard(&keys.delayed)
            .hmget(&keys.farinfo, &["count", "dead_dropped", "rate"])
            .zcard(&keys.inflight)
            .zcard(&keys.dead)
            .zrange_withscores(&keys.delayed, 0, 0)
            .zrange_withscores(&keys.far, 0, 0)
            .zrange_withscores(&keys.inflight, 0, 0)
            .hgetall(&keys.stats)
            .cmd("TIME")
            .exists(&keys.paused);
        let pipe = &pipe;
        type Reply = (
            usize,
            (Option<usize>, Option<u64>, Option<String>),
            usize,
            usize,
            Vec<(String, f64)>,
            Vec<(String, f64)>,
            Vec<(String, f64)>,
            Vec<(String, u64)>,
            (u64, u64),
            bool,
        );
        let (
            hot,
            (far, dead_dropped, rate),
            inflight,
            dead,
            due,
            far_due,
            claim,
            fields,
            (secs, micros),
            paused,
        ): Reply = on_topic(&self.conn, &keys, |mut conn| async move {
            pipe.query_async(&mut conn).await
        })
        .await?;
        let now_ms = secs * 1000 + micros / 1000;
        Ok(TopicStats {
            topic: keys.topic.clone(),
            delayed: hot + far.unwrap_or(0),
            inflight,
            dead,
            // A far bucket's score is a lower bound of its earliest due time (exact unless
            // that message was cancelled or moved).
            next_due: [first_score(&due), first_score(&far_due)]
                .into_iter()
                .flatten()
                .min(),
            oldest_claim_deadline: first_score(&claim),
            last_minute: last_minute(&fields, now_ms),
            read_at: ms_to_time(now_ms),
            paused,
            dead_dropped: dead_dropped.unwrap_or(0),
            rate,
        })
    }

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
            let hot: usize = on_topic(&self.conn, &keys, |mut c| {
                let key = keys.delayed.clone();
                async move { redis::cmd("ZCARD").arg(key).query_async(&mut c).await }
            })
            .await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_minute_sums_the_buckets_that_overlap_it() {
        let now = 1_000_000_000_u64; // bucket 100,000
        let fields = vec![
            ("ok:100000".to_string(), 3),
            ("ok:99994".to_string(), 2),  // 60 s before now: overlaps
            ("ok:99993".to_string(), 50), // older
            ("retry:99999".to_string(), 4),
            ("dead:100000".to_string(), 1),
            ("junk".to_string(), 9),
        ];
        let o = last_minute(&fields, now);
        assert_eq!((o.ok, o.retry, o.dead), (5, 4, 1));
    }
}
