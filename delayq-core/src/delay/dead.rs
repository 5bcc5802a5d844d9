//! Dead letters as users see them, and the producer's calls that list, replay and purge them.

use std::ops::Range;
use std::time::SystemTime;

use redis::Value;

use super::call::invoke;
use super::envelope::Envelope;
use super::keys::TopicKeys;
use super::scripts::{self, State};
use crate::connection::RedisConn;
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;
use crate::time::ms_to_time;

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
    ///
    /// # Errors
    /// serde_json's error when the payload is not JSON of type `T`.
    pub fn payload_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.payload)
    }
}

fn bad(detail: impl std::fmt::Display) -> Error {
    Error::unexpected("dead_letters", &detail.to_string())
}

/// One row of a `list.lua` page: id, score (ms) and the raw envelope, if any.
pub(crate) struct Row {
    pub id: MessageId,
    pub score_ms: u64,
    pub raw: Option<Vec<u8>>,
}

/// Splits a `list.lua` reply into rows.
pub(crate) fn parse_rows(reply: Vec<Value>) -> Result<Vec<Row>> {
    let mut out = Vec::with_capacity(reply.len() / 3);
    let mut it = reply.into_iter();
    while let (Some(id), Some(score), Some(env)) = (it.next(), it.next(), it.next()) {
        let id: String = redis::from_redis_value(id).map_err(bad)?;
        let score: f64 = redis::from_redis_value(score).map_err(bad)?;
        out.push(Row {
            id: MessageId::from_stored(id),
            score_ms: score as u64,
            raw: redis::from_redis_value(env).map_err(bad)?,
        });
    }
    Ok(out)
}

fn dead_letter(keys: &TopicKeys, row: Row) -> DeadLetter {
    let (id, died_at) = (row.id, ms_to_time(row.score_ms));
    match row.raw.as_deref().map(Envelope::parse) {
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
            payload: row.raw.unwrap_or_default(),
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
    }
}

/// Dead letters moved or deleted per script call, so no call blocks Redis for long.
const DEAD_CHUNK: usize = 1_000;
/// Rows one call of `list.lua` reads at most: a longer page takes several calls, and a far
/// bucket is walked in HSCAN steps of about this many.
pub(crate) const LIST_CHUNK: usize = 500;

/// The rows of `state` in index `range` (for `Delayed`, of the hot messages only), in calls
/// of at most `LIST_CHUNK` rows each; fewer when the set ends first.
pub(crate) async fn list_rows(
    conn: &RedisConn,
    keys: &TopicKeys,
    state: State,
    range: Range<usize>,
) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut start = range.start;
    while start < range.end {
        let stop = range.end.min(start + LIST_CHUNK) - 1;
        let inv = scripts::list(keys, state, start, stop);
        let reply: Vec<Value> = invoke(conn, keys, &inv).await?;
        let chunk = parse_rows(reply)?;
        let full = chunk.len() == stop - start + 1;
        rows.extend(chunk);
        if !full {
            break;
        }
        start = stop + 1;
    }
    Ok(rows)
}

/// The dead-letter calls of API.md.
impl Producer {
    /// Dead letters of `topic`, oldest first, by index range (`0..100` for the first 100).
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn dead_letters(&self, topic: &str, range: Range<usize>) -> Result<Vec<DeadLetter>> {
        let keys = self.keys(topic)?;
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let rows = list_rows(&self.conn, &keys, State::Dead, range).await?;
        Ok(rows
            .into_iter()
            .map(|row| dead_letter(&keys, row))
            .collect())
    }

    /// One dead letter of `topic` by id; `None` when that id is not dead.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn dead_letter(&self, topic: &str, id: &MessageId) -> Result<Option<DeadLetter>> {
        let keys = self.keys(topic)?;
        let inv = scripts::list_one(&keys, &Default::default(), State::Dead, id);
        let reply: Vec<Value> = invoke(&self.conn, &keys, &inv).await?;
        let rows = parse_rows(reply)?;
        Ok(rows.into_iter().next().map(|row| dead_letter(&keys, row)))
    }

    /// Deletes one dead letter; `false` when that id is not dead.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn purge_dead_letter(&self, topic: &str, id: &MessageId) -> Result<bool> {
        let keys = self.keys(topic)?;
        let n: usize = invoke(&self.conn, &keys, &scripts::purge_dead_one(&keys, id)).await?;
        Ok(n == 1)
    }

    /// Moves one dead letter back to due-now with a fresh attempt count; `false` when it is
    /// not dead (or its envelope does not parse).
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn replay_dead(&self, topic: &str, id: &MessageId) -> Result<bool> {
        let keys = self.keys(topic)?;
        let (replayed, _, _, _): (usize, usize, u64, usize) =
            invoke(&self.conn, &keys, &scripts::replay_one(&keys, id)).await?;
        Ok(replayed == 1)
    }

    /// Moves every dead letter of `topic` back to due-now; returns how many. It replays what
    /// was dead when it started: messages that die again while it runs stay dead.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call; a
    /// batch that fails leaves the dead letters not yet replayed where they are.
    pub async fn replay_all_dead(&self, topic: &str) -> Result<usize> {
        let keys = self.keys(topic)?;
        let (mut replayed_total, mut left_dead) = (0, 0);
        let (mut cutoff, mut budget) = (None, None);
        loop {
            let inv = scripts::replay_oldest(&keys, DEAD_CHUNK, left_dead, cutoff);
            let (replayed, stayed, at, dead_then): (usize, usize, u64, usize) =
                invoke(&self.conn, &keys, &inv).await?;
            // The first call fixes the cutoff and how many letters were dead at it.
            let budget = *budget.get_or_insert(dead_then);
            cutoff = Some(at);
            replayed_total += replayed;
            left_dead += stayed;
            if replayed + stayed < DEAD_CHUNK || replayed_total + left_dead >= budget {
                return Ok(replayed_total);
            }
        }
    }

    /// Deletes every dead letter of `topic`; returns how many.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn purge_dead(&self, topic: &str) -> Result<usize> {
        let keys = self.keys(topic)?;
        let mut total = 0;
        loop {
            let n: usize =
                invoke(&self.conn, &keys, &scripts::purge_dead(&keys, DEAD_CHUNK)).await?;
            total += n;
            if n < DEAD_CHUNK {
                return Ok(total);
            }
        }
    }
}
