//! What `settle.lua` answers, and what a batch of settles did ([`Settled`]).

use std::time::Duration;

use redis::Value;

use super::build::FLOW_TTL;
use crate::error::{Error, Result};

/// What one `settle.lua` call answered: steps made ready, how many the outbox holds, ...
pub(super) struct FlowSettled {
    pub(super) made_ready: i64,
    pub(super) outbox: i64,
    pub(super) ttl: Duration,
    /// The flow's end when the call ended it, and which steps this call ended (not stale).
    pub(super) ended: (Option<&'static str>, Vec<bool>),
}

pub(super) fn parse(reply: &Value) -> Result<Option<FlowSettled>> {
    let Value::Array(parts) = reply else {
        return Err(Error::unexpected("settle flow steps", reply));
    };
    let word = |i: usize| match parts.get(i) {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Value::SimpleString(s)) => s.clone(),
        _ => String::new(),
    };
    let int = |i: usize| match parts.get(i) {
        Some(Value::Int(n)) => *n,
        _ => 0,
    };
    match word(0).as_str() {
        "gone" => Ok(None),
        "ok" => Ok(Some(FlowSettled {
            made_ready: int(2),
            outbox: int(3),
            ttl: word(4).parse().map_or(FLOW_TTL, Duration::from_millis),
            ended: (
                match word(5).as_str() {
                    "done" => Some("done"),
                    "failed" => Some("failed"),
                    _ => None,
                },
                match parts.get(1) {
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|v| matches!(v, Value::BulkString(b) if b == b"ok"))
                        .collect(),
                    _ => Vec::new(),
                },
            ),
        })),
        _ => Err(Error::unexpected("settle flow steps", reply)),
    }
}

/// What [`settle_steps`](crate::settle_steps) did.
#[derive(Debug, Default)]
pub struct Settled {
    /// For each message given: settled (or not a flow step's), or not (its note stays, for
    /// the back pool's sweep).
    pub settled: Vec<bool>,
    /// The ends of the flows these settles ended (`done`, `failed`).
    pub flows_ended: Vec<&'static str>,
    /// The steps these settles ended done (not those settled before).
    pub done: usize,
    /// The steps these settles ended failed (not those settled before).
    pub failed: usize,
    /// The first error met, if any.
    pub error: Option<Error>,
}
