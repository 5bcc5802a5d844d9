//! How a message stands or ended ([`Outcome`]), as `outcome.lua` answers, and
//! [`Producer::result`].

use redis::ScriptInvocation;
use serde::de::DeserializeOwned;

use super::super::buckets::{declaring, Buckets};
use super::super::keys::TopicKeys;
use super::super::scripts::{topic_script, SCRIPTS};
use crate::connection::RedisConn;
pub use crate::error::Unfinished;
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;

/// How a message stands or how it ended, as [`Producer::result`] and [`Producer::wait`]
/// answer. `T` is the handler's value (`serde_json::Value` reads any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<T> {
    /// It succeeded; the value its handler returned (`()` for a handler that returns none:
    /// a wait hears such an end, but nothing is kept for `result`).
    Done(T),
    /// It is dead (a dead letter): its attempts ran out, or it was dead-lettered by hand.
    Dead {
        /// Why it died.
        reason: String,
    },
    /// It was cancelled before it ran.
    Cancelled,
    /// It has not ended: delayed, or running now (a wait's timeout passed first).
    Pending,
    /// Nothing is known of it: never sent, ended without a kept outcome (a handler that
    /// returns no value), or kept past `result_ttl`, dropped past `results_max`, purged.
    Unknown,
}

/// An outcome as the scripts give it: the value still JSON.
pub(crate) type RawOutcome = Outcome<Vec<u8>>;

/// One answer of `outcome.lua` (or one end heard on a channel: `<kind>\n<body>`).
pub(crate) fn parse(answer: &[u8]) -> Result<RawOutcome> {
    let (kind, body) = match answer.iter().position(|&b| b == b'\n') {
        Some(i) => (&answer[..i], &answer[i + 1..]),
        None => (answer, &[][..]),
    };
    Ok(match kind {
        b"pending" => Outcome::Pending,
        b"unknown" => Outcome::Unknown,
        b"cancelled" => Outcome::Cancelled,
        b"done" => Outcome::Done(body.to_vec()),
        b"dead" => Outcome::Dead {
            reason: String::from_utf8_lossy(body).into_owned(),
        },
        _ => {
            return Err(Error::unexpected(
                "outcome",
                &String::from_utf8_lossy(answer),
            ))
        }
    })
}

impl RawOutcome {
    /// The same with the value decoded as a `T`.
    pub(crate) fn decode<T: DeserializeOwned>(
        self,
        topic: &str,
        id: &MessageId,
    ) -> Result<Outcome<T>> {
        Ok(match self {
            Outcome::Done(json) => {
                Outcome::Done(
                    serde_json::from_slice(&json).map_err(|e| Error::ResultDecode {
                        topic: topic.to_string(),
                        id: id.to_string(),
                        reason: format!("does not decode into {}: {e}", std::any::type_name::<T>()),
                    })?,
                )
            }
            Outcome::Dead { reason } => Outcome::Dead { reason },
            Outcome::Cancelled => Outcome::Cancelled,
            Outcome::Pending => Outcome::Pending,
            Outcome::Unknown => Outcome::Unknown,
        })
    }
}

/// How `outcome.lua` registers waits: not at all (a read), for the ids not ended, or for
/// those not sent yet too (`send_and_wait`, before it sends).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Register {
    No,
    Pending(u64),
    Ahead(u64),
}

/// `outcome.lua` for `ids`, registering waits as `register` says.
pub(crate) fn outcome_call(
    k: &TopicKeys,
    far: &Buckets,
    register: Register,
    ids: &[MessageId],
) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.outcome, k, far);
    let (ms, ahead) = match register {
        Register::No => (0, false),
        Register::Pending(ms) => (ms.max(1), false),
        Register::Ahead(ms) => (ms.max(1), true),
    };
    inv.arg(ms).arg(u8::from(ahead));
    for id in ids {
        inv.arg(id.as_str());
    }
    inv
}

/// How `ids` of `keys`' topic stand, in their order; waits registered as `register` says.
pub(crate) async fn outcomes(
    conn: &RedisConn,
    keys: &TopicKeys,
    register: Register,
    ids: &[MessageId],
) -> Result<Vec<RawOutcome>> {
    let far = ids
        .iter()
        .fold(Buckets::default(), |far, id| far.id(keys, id));
    let answers: Vec<Vec<u8>> = declaring(conn, keys, far, |far| {
        outcome_call(keys, far, register, ids)
    })
    .await?;
    if answers.len() != ids.len() {
        return Err(Error::unexpected("outcome", &answers.len()));
    }
    answers.iter().map(|a| parse(a)).collect()
}

impl Producer {
    /// How message `id` of `topic` stands or ended: [`Outcome::Done`] with the value its
    /// handler returned (kept for the listener's `result_ttl`, at most `results_max` a topic),
    /// `Dead` (while the dead letter is kept), `Cancelled` (kept like a value, on a topic whose
    /// listener keeps results), `Pending`, or `Unknown`.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::ResultDecode`](crate::Error::ResultDecode) when the value is not a `T`;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn result<T: DeserializeOwned>(
        &self,
        topic: &str,
        id: &MessageId,
    ) -> Result<Outcome<T>> {
        let keys = self.keys(topic)?;
        let mut got = outcomes(&self.conn, &keys, Register::No, std::slice::from_ref(id)).await?;
        got.pop()
            .ok_or_else(|| Error::unexpected("outcome", &"no answer"))?
            .decode(topic, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse() {
        assert_eq!(parse(b"pending").unwrap(), Outcome::Pending);
        assert_eq!(
            parse(b"done\n{\"a\":1}").unwrap(),
            Outcome::Done(b"{\"a\":1}".to_vec())
        );
        assert_eq!(
            parse(b"dead\nboom\nagain").unwrap(),
            Outcome::Dead {
                reason: "boom\nagain".into()
            }
        );
        assert_eq!(parse(b"cancelled\n").unwrap(), Outcome::Cancelled);
        assert!(parse(b"what").is_err());
    }
}
