//! The delay queue's side of schedules: a schedule's ticks enter its topic in one script,
//! fenced by the schedule's record (which lives in the topic's slot), and where a tick is now.

use super::buckets::{declaring, Buckets};
use super::keys::TopicKeys;
use redis::ScriptInvocation;

use super::scripts::{topic_script, SCRIPTS};
use crate::connection::RedisConn;
use crate::error::{Error, Result};
use crate::id::MessageId;

/// What a fenced tick call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TickCall {
    /// The record's `next` or `gen` was not the one given: another process produced these
    /// ticks, or the schedule changed or is gone. The record's current ones (`next` is `None`
    /// when it is gone).
    Stale {
        /// The record's `next` as stored.
        next: Option<String>,
        /// The record's `gen` as stored (`0` when it has none).
        gen: String,
        /// The record's `last` as stored, if any.
        last: Option<String>,
    },
    /// The caller's clock is ahead of Redis', or the ticks' lateness looks different at Redis'
    /// time: nothing was written; plan again at Redis' `now` (unix ms).
    Clock(u64),
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
    if let redis::Value::Int(n) = reply {
        return Ok(TickCall::Produced(usize::try_from(n).unwrap_or(0)));
    }
    let parts: Vec<redis::Value> = redis::from_redis_value(reply.clone()).unwrap_or_default();
    let text = |i: usize| {
        parts
            .get(i)
            .and_then(|v| redis::from_redis_value::<Option<String>>(v.clone()).ok())
            .flatten()
    };
    match text(0).as_deref() {
        Some("stale") => Ok(TickCall::Stale {
            next: text(1),
            gen: text(2).unwrap_or_else(|| "0".into()),
            last: text(3),
        }),
        Some("clock") => match text(1).and_then(|n| n.parse().ok()) {
            Some(now) => Ok(TickCall::Clock(now)),
            None => Err(Error::unexpected("tick", &reply)),
        },
        _ => Err(Error::unexpected("tick", &reply)),
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

/// The ticks of one schedule call (`tick.lua`): fenced by `record`'s `next` and `gen`.
pub(crate) struct Ticks<'a> {
    /// The schedule's record (in the topic's slot): the last key.
    pub record: &'a str,
    /// Its `next` and `gen` as read, and the `next` after these ticks.
    pub expected_next: &'a str,
    pub expected_gen: &'a str,
    pub new_next: u64,
    /// Ticks skipped since the last one produced.
    pub missed: u64,
    /// Each tick's attempts (0: the listener's default).
    pub max_attempts: u32,
    /// `(id, unix ms)` of each tick.
    pub ticks: &'a [(MessageId, u64)],
    /// The caller's now (its estimate of Redis' clock, unix ms).
    pub now_ms: u64,
    /// A tick due more than this (ms) before Redis' now is missed.
    pub misfire_after_ms: u64,
    /// The caller classified the ticks for a cutoff in `(lo, hi]` (unix ms).
    pub lo: u64,
    pub hi: u64,
    /// Ticks written ahead earlier that the catch-up policy skips if they still wait, never
    /// claimed, due before Redis' cutoff.
    pub stale: &'a [MessageId],
}

fn tick_call(k: &TopicKeys, far: &Buckets, t: &Ticks<'_>) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.tick, k, far);
    inv.key(t.record)
        .arg(t.expected_next)
        .arg(t.expected_gen)
        .arg(t.new_next)
        .arg(t.missed)
        .arg(t.max_attempts)
        .arg(t.now_ms)
        .arg(t.misfire_after_ms)
        .arg(t.lo)
        .arg(t.hi)
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
    let mut inv = topic_script(&SCRIPTS.state, k, far);
    inv.arg(id.as_str());
    inv
}
