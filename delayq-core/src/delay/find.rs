//! `Producer::find`: where one message is now, with what its envelope says (`delayq find` and
//! the dashboard's search). One script call of a few lookups by id (`scripts/delay/find.lua`),
//! whatever the topic holds.

use std::time::SystemTime;

use redis::Value;

use super::buckets::{declaring, Buckets};
use super::envelope::Envelope;
use super::scripts::{topic_script, SCRIPTS};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;
use crate::time::ms_to_time;

/// Where a message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Waiting for `due_at` (or due and not yet claimed).
    Delayed {
        /// When it is due.
        due_at: SystemTime,
    },
    /// Claimed by a consumer: running, or lost until its claim's deadline passes.
    InFlight {
        /// When its claim ends unless renewed or acked (then it is delivered again).
        deadline: SystemTime,
    },
    /// In the dead letters.
    Dead {
        /// When it died.
        died_at: SystemTime,
        /// Why.
        reason: String,
    },
    /// Finished (acknowledged, or dead and purged) with its id still reserved by
    /// `SendOptions::dedup_for`: a send with it is a duplicate until `reserved_until`.
    Finished {
        /// The end of the reservation.
        reserved_until: SystemTime,
    },
    /// Not in the topic: never sent, acknowledged, cancelled or purged.
    Unknown,
}

/// What `Producer::find` found of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundMessage {
    /// The message id.
    pub id: MessageId,
    /// Where it is.
    pub place: Place,
    /// Handler runs so far (the current one included while in flight).
    pub attempts: u32,
    /// The last handler error, if it failed before.
    pub last_error: Option<String>,
    /// When it was sent.
    pub enqueued_at: Option<SystemTime>,
    /// When it is (or was) due.
    pub due_at: Option<SystemTime>,
    /// The payload (JSON as sent); empty when nothing is stored (finished, unknown), the raw
    /// value when the envelope does not parse.
    pub payload: Vec<u8>,
    /// Why the stored envelope does not parse, when it does not.
    pub unreadable: Option<String>,
}

fn bad(detail: impl std::fmt::Debug) -> Error {
    Error::unexpected("find", &detail)
}

fn found(id: &MessageId, place: &str, ms: u64, raw: Option<Vec<u8>>) -> Result<FoundMessage> {
    let at = ms_to_time(ms);
    let envelope = raw.as_deref().map(Envelope::parse);
    let place = match place {
        "delayed" => Place::Delayed { due_at: at },
        "inflight" => Place::InFlight { deadline: at },
        "dead" => Place::Dead {
            died_at: at,
            reason: match &envelope {
                Some(Ok(e)) => e.dead_reason.clone(),
                _ => String::new(),
            },
        },
        "finished" => Place::Finished { reserved_until: at },
        "unknown" => Place::Unknown,
        other => return Err(bad(other)),
    };
    let mut out = FoundMessage {
        id: id.clone(),
        place,
        attempts: 0,
        last_error: None,
        enqueued_at: None,
        due_at: None,
        payload: Vec::new(),
        unreadable: None,
    };
    match envelope {
        Some(Ok(e)) => {
            out.attempts = e.attempt;
            out.last_error = (!e.last_error.is_empty()).then_some(e.last_error);
            out.enqueued_at = Some(ms_to_time(e.enqueued_ms));
            out.due_at = Some(ms_to_time(e.due_ms));
            out.payload = e.payload;
        }
        Some(Err(why)) => {
            out.unreadable = Some(why);
            out.payload = raw.unwrap_or_default();
        }
        None if matches!(
            out.place,
            Place::Delayed { .. } | Place::InFlight { .. } | Place::Dead { .. }
        ) =>
        {
            out.unreadable = Some("its envelope is missing".into());
        }
        None => {}
    }
    Ok(out)
}

impl Producer {
    /// Where message `id` of `topic` is now (delayed with its due time, in flight with its
    /// claim's deadline, dead with the reason, finished within a `dedup_for` window, or
    /// unknown), with its attempts, last error and payload. One bounded script call.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn find(&self, topic: &str, id: &MessageId) -> Result<FoundMessage> {
        let keys = self.keys(topic)?;
        let far = Buckets::default().id(&keys, id);
        // A read: retried once on a lost connection.
        let once = || {
            declaring(&self.conn, &keys, far.clone(), |far| {
                let mut inv = topic_script(&SCRIPTS.find, &keys, far);
                inv.arg(id.as_str());
                inv
            })
        };
        let reply: Vec<Value> = self.conn.retry_once(once).await?;
        let [place, ms, raw]: [Value; 3] = reply.try_into().map_err(bad)?;
        let place: String = redis::from_redis_value(place).map_err(bad)?;
        let ms: u64 = redis::from_redis_value(ms).map_err(bad)?;
        let raw: Option<Vec<u8>> = match raw {
            Value::Nil | Value::Boolean(false) | Value::Int(0) => None,
            v => Some(redis::from_redis_value(v).map_err(bad)?),
        };
        found(id, &place, ms, raw)
    }
}
