//! The delay queue's side of schedules: a schedule's ticks enter its topic in one script,
//! fenced by the schedule's record (which lives in the topic's slot), and where a tick is now.

use super::buckets::{declaring, Buckets};
use super::keys::TopicKeys;
use redis::ScriptInvocation;

use super::scripts::{on_topic, SCRIPTS};
use crate::connection::RedisConn;
use crate::error::{Error, Result};
use crate::id::MessageId;

/// What a fenced tick call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickCall {
    /// The record's `next` was not the one given: another process produced these ticks, or
    /// the schedule changed or is gone.
    Stale,
    /// The ticks were written (this many new; one already there is left as it is).
    Produced(usize),
}

/// Where a message is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageState {
    /// Waiting for its due time (`attempt`: handler runs so far).
    Delayed {
        /// Handler runs so far.
        attempt: u32,
    },
    /// Claimed by a consumer.
    InFlight,
    /// In the dead letters.
    Dead,
    /// Unknown: acked, cancelled, or never sent.
    Gone,
}

/// Writes `ticks` into `keys`' topic if `ticks.record`'s `next` is still `ticks.expected_next`.
pub async fn send_ticks(conn: &RedisConn, keys: &TopicKeys, ticks: &Ticks<'_>) -> Result<TickCall> {
    let mut far = Buckets::default();
    for (id, at) in ticks.ticks {
        far = far.due(keys, *at).id(keys, id);
    }
    let reply: redis::Value = declaring(conn, keys, far, |far| tick_call(keys, far, ticks)).await?;
    match reply {
        redis::Value::Int(n) => Ok(TickCall::Produced(usize::try_from(n).unwrap_or(0))),
        other => match redis::from_redis_value::<String>(other.clone()) {
            Ok(s) if s == "stale" => Ok(TickCall::Stale),
            _ => Err(Error::unexpected("tick", &other)),
        },
    }
}

/// Where message `id` of `keys`' topic is.
pub async fn state_of(conn: &RedisConn, keys: &TopicKeys, id: &MessageId) -> Result<MessageState> {
    let far = Buckets::default().id(keys, id);
    let (state, attempt): (String, u32) =
        declaring(conn, keys, far, |far| state_call(keys, far, id)).await?;
    Ok(match state.as_str() {
        "inflight" => MessageState::InFlight,
        "dead" => MessageState::Dead,
        "delayed" => MessageState::Delayed { attempt },
        "none" => MessageState::Gone,
        other => return Err(Error::unexpected("state", &other)),
    })
}

/// The ticks of one schedule call (`tick.lua`): fenced by `record`'s `next`.
pub(crate) struct Ticks<'a> {
    /// The schedule's record (in the topic's slot): the last key.
    pub record: &'a str,
    /// Its `next` as read, and the `next` after these ticks.
    pub expected_next: &'a str,
    pub new_next: u64,
    /// Ticks skipped since the last one produced.
    pub missed: u64,
    /// Each tick's attempts (0: the listener's default).
    pub max_attempts: u32,
    /// `(id, unix ms)` of each tick.
    pub ticks: &'a [(MessageId, u64)],
    /// Ticks written ahead earlier that the catch-up policy skips if they still wait
    /// unclaimed, due before `stale_before` (unix ms).
    pub stale: &'a [MessageId],
    pub stale_before: u64,
}

fn tick_call(k: &TopicKeys, far: &Buckets, t: &Ticks<'_>) -> ScriptInvocation<'static> {
    let mut inv = on_topic(&SCRIPTS.tick, k, far);
    inv.key(t.record)
        .arg(t.expected_next)
        .arg(t.new_next)
        .arg(t.missed)
        .arg(t.max_attempts)
        .arg(t.stale_before)
        .arg(t.stale.len());
    for id in t.stale {
        inv.arg(id.as_str());
    }
    for (id, at) in t.ticks {
        inv.arg(id.as_str()).arg(*at);
    }
    inv
}

fn state_call(k: &TopicKeys, far: &Buckets, id: &MessageId) -> ScriptInvocation<'static> {
    let mut inv = on_topic(&SCRIPTS.state, k, far);
    inv.arg(id.as_str());
    inv
}
