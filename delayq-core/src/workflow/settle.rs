//! Settling a step whose message ended, in its flow: the runtime's call after an ack or a
//! death, and the back pool's sweep of the ends a crash left unsettled.

use redis::Value;

use super::keys::{parse_step_id, SCRIPTS};
use crate::delay::{Outcome, TopicKeys};
use crate::error::Result;
use crate::id::MessageId;
use crate::producer::Producer;

/// Ended steps one sweep settles at most.
const SWEEP_STEPS: isize = 200;

/// How a flow step's message ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepEnd {
    /// Acked.
    Done,
    /// Dead (or cancelled by hand), for this reason.
    Failed(String),
}

impl Producer {
    /// `settle.lua`: step `name`'s run `gen` of flow `flow` ended as `end`.
    pub(super) async fn settle_in_flow(
        &self,
        flow: &super::keys::FlowId,
        name: &str,
        gen: u64,
        end: &StepEnd,
    ) -> Result<Value> {
        let (kind, reason) = match end {
            StepEnd::Done => ("done", ""),
            StepEnd::Failed(r) => ("dead", r.as_str()),
        };
        let mut inv = self.flow_keys(flow).invoke(&SCRIPTS.settle);
        inv.arg(name).arg(gen).arg(kind).arg(reason);
        self.flow_call(inv).await
    }
}

/// Settles the flow step whose message `id` of `keys`' topic ended as `end`: the steps that
/// waited for it are sent, then the topic's note of it is dropped. Idempotent: a second call
/// (after a crash) changes nothing twice.
///
/// # Errors
/// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses a call (the
/// note stays: the back pool's sweep settles it later).
pub async fn settle_step(
    p: &Producer,
    keys: &TopicKeys,
    id: &MessageId,
    end: &StepEnd,
) -> Result<Option<&'static str>> {
    let Some((flow, name, gen)) = parse_step_id(id.as_str()) else {
        return Ok(None);
    };
    let reply = p.settle_in_flow(&flow, &name, gen, end).await?;
    let ended = match &reply {
        Value::Array(parts) => match parts.get(2) {
            Some(Value::BulkString(b)) if b == b"done" => Some("done"),
            Some(Value::BulkString(b)) if b == b"failed" => Some("failed"),
            _ => None,
        },
        _ => None,
    };
    let ttl = match &reply {
        Value::Array(parts) if matches!(parts.first(), Some(Value::BulkString(b)) if b != b"gone") => {
            Some(p.flow_ttl(&flow).await?)
        }
        _ => None,
    };
    if let Some(ttl) = ttl {
        p.send_outbox(&flow, ttl).await?;
    }
    drop_note(p, keys, id).await?;
    Ok(ended)
}

/// Drops the topic's note that step message `id` ended.
async fn drop_note(p: &Producer, keys: &TopicKeys, id: &MessageId) -> Result<()> {
    let steps = keys.steps.clone();
    p.conn
        .run(|mut c| {
            let (steps, id) = (&steps, id.as_str());
            async move {
                redis::cmd("ZREM")
                    .arg(steps)
                    .arg(id)
                    .query_async::<()>(&mut c)
                    .await
            }
        })
        .await?;
    Ok(())
}

/// Settles the flow steps of `keys`' topic whose messages ended and are not settled yet (a
/// process died between the end and the settle, or is settling them now: a second settle
/// changes nothing); returns how many, at most 200 a call.
///
/// # Errors
/// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses a call.
pub async fn settle_ended_steps(p: &Producer, keys: &TopicKeys) -> Result<usize> {
    let steps = keys.steps.clone();
    let noted: Vec<(String, f64)> = p
        .conn
        .run(|mut c| {
            let steps = &steps;
            async move {
                redis::cmd("ZRANGE")
                    .arg(steps)
                    .arg(0)
                    .arg(SWEEP_STEPS - 1)
                    .arg("WITHSCORES")
                    .query_async(&mut c)
                    .await
            }
        })
        .await?;
    if noted.is_empty() {
        return Ok(0);
    }
    // The score is when it ended, negated when it did not succeed.
    let due: Vec<(MessageId, bool)> = noted
        .iter()
        .map(|(id, at)| (MessageId::from_stored(id.clone()), *at >= 0.0))
        .collect();
    let ids: Vec<MessageId> = due.iter().map(|(id, _)| id.clone()).collect();
    let outcomes = crate::delay::outcomes_of(&p.conn, keys, &ids).await?;
    let mut settled = 0;
    for ((id, ok), outcome) in due.iter().zip(outcomes) {
        let end = match (ok, outcome) {
            // Sent again since (its dead letter replayed): its next end notes it again.
            (_, Outcome::Pending) => {
                drop_note(p, keys, id).await?;
                continue;
            }
            (true, _) => StepEnd::Done,
            (false, Outcome::Dead { reason }) => StepEnd::Failed(reason),
            (false, _) => StepEnd::Failed("its message was cancelled, or is gone".into()),
        };
        // One that fails is left for the next sweep; the others go on.
        match settle_step(p, keys, id, &end).await {
            Ok(_) => settled += 1,
            Err(e) => {
                tracing::warn!(step = %id, error = %e, "a flow step's end could not be settled; the next sweep tries again")
            }
        }
    }
    Ok(settled)
}

impl crate::delay::TopicQueue {
    /// Settles the flow step whose message `id` ended as `end` (see [`settle_step`]); a
    /// message that is not a flow step's is left alone.
    ///
    /// # Errors
    /// As [`settle_step`].
    pub async fn settle_step(&self, id: &MessageId, end: &StepEnd) -> Result<Option<&'static str>> {
        if !super::keys::is_step_id(id.as_str()) {
            return Ok(None);
        }
        settle_step(self.producer(), self.keys(), id, end).await
    }

    /// Settles the flow steps whose messages ended and are not settled (see
    /// [`settle_ended_steps`]).
    ///
    /// # Errors
    /// As [`settle_ended_steps`].
    pub async fn settle_ended_steps(&self) -> Result<usize> {
        settle_ended_steps(self.producer(), self.keys()).await
    }
}
