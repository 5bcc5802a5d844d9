//! Settling steps whose messages ended, in their flows (one `settle.lua` call a flow for all
//! that ended together), and the back pool's sweep of the ends a crash left unsettled.

use std::collections::BTreeMap;

use futures_util::StreamExt;

use super::keys::{parse_step_id, FlowId, SCRIPTS};
pub use super::settled::Settled;
use super::settled::{parse, FlowSettled};
use crate::delay::{Outcome, TopicKeys};
use crate::error::Result;
use crate::id::MessageId;
use crate::producer::Producer;

/// Ended steps one sweep settles at most.
const SWEEP_STEPS: isize = 200;
/// Flows settled at once.
const FLOWS_AT_ONCE: usize = 16;

/// How a flow step's message ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepEnd {
    /// Acked, its value kept in its topic (`ack_keep`).
    Done,
    /// Acked, its handler returning nothing: nothing kept (the step reads as JSON `null`).
    Empty,
    /// Dead (or cancelled by hand), for this reason.
    Failed(String),
}

impl Producer {
    /// `settle.lua`: step `name`'s run `gen` of flow `flow` ended as `end`. Returns whether
    /// this call ended it (not stale), and the flow's end when it ended the flow.
    pub(super) async fn settle_in_flow(
        &self,
        flow: &FlowId,
        name: &str,
        gen: u64,
        end: &StepEnd,
    ) -> Result<(bool, Option<&'static str>)> {
        let settled = self.settle_many(flow, &[(name, gen, end)]).await?;
        Ok(settled.map_or((false, None), |s| {
            (s.ended.1.first() == Some(&true), s.ended.0)
        }))
    }

    async fn settle_many(
        &self,
        flow: &FlowId,
        steps: &[(&str, u64, &StepEnd)],
    ) -> Result<Option<FlowSettled>> {
        let keys = self.flow_keys(flow);
        let mut inv = keys.invoke(&SCRIPTS.settle);
        // How each ended, a character a step; then each step's name and gen; then the
        // reasons of those that failed.
        let kinds: String = steps
            .iter()
            .map(|(_, _, end)| match end {
                StepEnd::Done => 'd',
                StepEnd::Empty => 'e',
                StepEnd::Failed(_) => 'x',
            })
            .collect();
        inv.arg(steps.len()).arg(kinds);
        for (name, gen, _) in steps {
            inv.arg(*name).arg(*gen);
        }
        for (_, _, end) in steps {
            if let StepEnd::Failed(reason) = end {
                inv.arg(reason.as_str());
            }
        }
        parse(&self.flow_call(&keys, inv).await?)
    }

    /// Settles one flow's ended steps; the outbox is sent when they made steps ready (or,
    /// `recovering`, whenever it holds some: a crash may have come between a settle and its
    /// send).
    async fn settle_flow(
        &self,
        flow: &FlowId,
        steps: &[(&str, u64, &StepEnd)],
        recovering: bool,
    ) -> Result<(Option<&'static str>, Vec<bool>)> {
        let Some(settled) = self.settle_many(flow, steps).await? else {
            return Ok((None, Vec::new()));
        };
        if settled.made_ready > 0 || (recovering && settled.outbox > 0) {
            self.send_outbox(flow, settled.ttl).await?;
        }
        Ok(settled.ended)
    }
}

/// Settles the flow steps whose messages `ends` of `keys`' topic ended: per flow, one
/// `settle.lua` call for all its steps, then its ready steps are sent; then the topic's notes
/// of those settled are dropped. Idempotent: a second call (after a crash) changes nothing
/// twice. A message that is not a flow step's is left alone.
pub async fn settle_steps(
    p: &Producer,
    keys: &TopicKeys,
    ends: &[(MessageId, StepEnd)],
) -> Settled {
    settle(p, keys, ends, false).await
}

async fn settle(
    p: &Producer,
    keys: &TopicKeys,
    ends: &[(MessageId, StepEnd)],
    recovering: bool,
) -> Settled {
    let mut flows: BTreeMap<FlowId, Vec<(usize, String, u64)>> = BTreeMap::new();
    let mut report = Settled {
        settled: vec![true; ends.len()],
        ..Settled::default()
    };
    for (i, (id, _)) in ends.iter().enumerate() {
        if let Some((flow, name, gen)) = parse_step_id(id.as_str()) {
            flows.entry(flow).or_default().push((i, name, gen));
        }
    }
    // Collected first: a lazy map over borrowed groups would be held across the awaits.
    let mut calls = Vec::with_capacity(flows.len());
    for (flow, steps) in &flows {
        calls.push(settle_group(p, flow, steps, ends, recovering));
    }
    let results: Vec<_> = futures_util::stream::iter(calls)
        .buffer_unordered(FLOWS_AT_ONCE)
        .collect()
        .await;
    for (steps, result) in results {
        match result {
            Ok((ended, fresh)) => {
                report.flows_ended.extend(ended);
                for ((i, _, _), _) in steps.iter().zip(fresh).filter(|(_, f)| *f) {
                    match ends[*i].1 {
                        StepEnd::Done | StepEnd::Empty => report.done += 1,
                        StepEnd::Failed(_) => report.failed += 1,
                    }
                }
            }
            Err(e) => {
                for (i, _, _) in steps {
                    report.settled[*i] = false;
                }
                report.error.get_or_insert(e);
            }
        }
    }
    let done: Vec<&str> = ends
        .iter()
        .zip(&report.settled)
        .filter(|((id, _), ok)| **ok && super::keys::is_step_id(id.as_str()))
        .map(|((id, _), _)| id.as_str())
        .collect();
    if let Err(e) = drop_notes(p, keys, &done).await {
        report.settled.iter_mut().for_each(|s| *s = false);
        report.error.get_or_insert(e);
    }
    report
}

/// One flow's part of `settle`: its steps (their places in `ends`) settled in one call.
async fn settle_group<'a>(
    p: &Producer,
    flow: &FlowId,
    steps: &'a [(usize, String, u64)],
    ends: &[(MessageId, StepEnd)],
    recovering: bool,
) -> (
    &'a [(usize, String, u64)],
    Result<(Option<&'static str>, Vec<bool>)>,
) {
    let each: Vec<(&str, u64, &StepEnd)> = steps
        .iter()
        .map(|(i, name, gen)| (name.as_str(), *gen, &ends[*i].1))
        .collect();
    (steps, p.settle_flow(flow, &each, recovering).await)
}

/// Settles step message `id`'s end (see [`settle_steps`]); the flow's end if it ended it.
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
    let report = settle_steps(p, keys, &[(id.clone(), end.clone())]).await;
    match report.error {
        Some(e) => Err(e),
        None => Ok(report.flows_ended.first().copied()),
    }
}

/// Drops the topic's notes that step messages `ids` ended.
async fn drop_notes(p: &Producer, keys: &TopicKeys, ids: &[&str]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let steps = keys.steps.clone();
    p.conn
        .run(|mut c| {
            let steps = &steps;
            async move {
                redis::cmd("ZREM")
                    .arg(steps)
                    .arg(ids)
                    .query_async::<()>(&mut c)
                    .await
            }
        })
        .await?;
    Ok(())
}

/// Settles the flow steps of `keys`' topic whose messages ended and are not settled yet (a
/// process died between the end and the settle, or is settling them now: a second settle
/// changes nothing), at most 200 a call; what it did, its first error within.
///
/// # Errors
/// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses a call.
pub async fn settle_ended_steps(p: &Producer, keys: &TopicKeys) -> Result<Settled> {
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
        return Ok(Settled::default());
    }
    // The score is when it ended, negated when it did not succeed.
    let ids: Vec<MessageId> = noted
        .iter()
        .map(|(id, _)| MessageId::from_stored(id.clone()))
        .collect();
    let outcomes = crate::delay::outcomes_of(&p.conn, keys, &ids).await?;
    let mut ends = Vec::new();
    let mut again = Vec::new();
    for ((id, (_, at)), outcome) in ids.into_iter().zip(&noted).zip(outcomes) {
        let end = match (*at >= 0.0, outcome) {
            // Sent again since (its dead letter replayed): its next end notes it again.
            (_, Outcome::Pending) => {
                again.push(id);
                continue;
            }
            // Acked with its value kept (its note half a ms on: `ack_keep.lua`), or by a plain
            // ack, its handler returning nothing (a whole ms).
            (true, Outcome::Done(_)) => StepEnd::Done,
            (true, _) if at.fract() != 0.0 => StepEnd::Done,
            (true, _) => StepEnd::Empty,
            (false, Outcome::Dead { reason }) => StepEnd::Failed(reason),
            (false, _) => StepEnd::Failed("its message was cancelled, or is gone".into()),
        };
        ends.push((id, end));
    }
    let again: Vec<&str> = again.iter().map(MessageId::as_str).collect();
    drop_notes(p, keys, &again).await?;
    Ok(settle(p, keys, &ends, true).await)
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

    /// Settles many flow steps' ends at once (see [`settle_steps`]).
    pub async fn settle_steps(&self, ends: &[(MessageId, StepEnd)]) -> Settled {
        settle_steps(self.producer(), self.keys(), ends).await
    }

    /// Settles the flow steps whose messages ended and are not settled (see
    /// [`settle_ended_steps`]).
    ///
    /// # Errors
    /// As [`settle_ended_steps`].
    pub async fn settle_ended_steps(&self) -> Result<Settled> {
        settle_ended_steps(self.producer(), self.keys()).await
    }
}
