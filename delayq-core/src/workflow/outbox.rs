//! Sending a flow's outbox: its ready steps, a page at a time, each page's steps of one topic
//! and options in one call, marked sent before the next page is read.
//!
//! A sender notes its intent first and drops it when the outbox is sent (`intent.rs`), so a
//! step made ready is sent even when its sender dies and no other step of its flow ends after.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::Value;
use serde_json::value::RawValue;

use super::intent::Intent;
use super::keys::{step_message_id, FlowId, SCRIPTS};
use super::settle::StepEnd;
use crate::delay::{Priority, SendOptions, Trusted};
use crate::error::{Error, Result};
use crate::producer::Producer;

/// Steps read from the outbox at once (sent, then marked sent, before the next page).
const OUTBOX_PAGE: usize = 64;
/// The start's first steps sent at once, from its own memory (another sender reads the
/// outbox only after a settle made steps ready, or the start's intent expired).
/// Fewer, fuller calls: a call's fixed work is paid once for them all.
const KNOWN_PAGE: usize = 1000;
/// States the sweep of a start that died looks at a page (`unsent.lua`).
const UNSENT_PAGE: usize = 500;
/// Whether `e` may pass (Redis did not answer, or the runtime stops): the send is tried again
/// later. Any other error refuses the step for good.
fn transient(e: &Error) -> bool {
    match e {
        Error::Redis(_) | Error::Stopped | Error::Connect { .. } => true,
        Error::Shared(inner) => transient(inner),
        _ => false,
    }
}

/// A step of the outbox, as outbox.lua gives it.
#[derive(Clone)]
pub(super) struct Outgoing {
    pub(super) name: String,
    pub(super) gen: u64,
    pub(super) topic: String,
    /// The options as stored (JSON): steps with the same are sent in one call.
    pub(super) options: String,
    pub(super) payload: String,
}

fn outgoing(v: &Value) -> Option<Outgoing> {
    let Value::Array(f) = v else { return None };
    let text = |i: usize| match f.get(i) {
        Some(Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        Some(Value::SimpleString(s)) => Some(s.clone()),
        _ => None,
    };
    let gen = match f.get(1) {
        Some(Value::Int(n)) => *n as u64,
        _ => text(1)?.parse().ok()?,
    };
    Some(Outgoing {
        name: text(0)?,
        gen,
        topic: text(2)?,
        options: text(3)?,
        payload: text(4)?,
    })
}

/// A step's stored options as the send takes them (all but the delay and the id).
fn options(stored: &str, ttl: Duration) -> Result<(SendOptions, Duration)> {
    let o: serde_json::Value = serde_json::from_str(stored).map_err(|e| Error::InvalidFlow {
        reason: format!("stored options {stored:?}: {e}"),
    })?;
    let mut options = SendOptions::new().dedup_for(ttl);
    if let Some(p) = o["priority"].as_u64() {
        options = options.priority(Priority::Level(p.min(255) as u8));
    }
    if let Some(k) = o["key"].as_str() {
        options = options.key(k);
    }
    if let Some(n) = o["max_attempts"].as_u64() {
        options = options.max_attempts(n as u32);
    }
    Ok((
        options,
        Duration::from_millis(o["delay_ms"].as_u64().unwrap_or(0)),
    ))
}

impl Producer {
    /// Sends the flow's ready steps (each under its step id, reserved for `ttl` once it ends,
    /// so a second send is a duplicate) and marks them sent. Returns how many were read.
    /// (Type-erased: the futures of the calls below nest too deep for the compiler to see
    /// through where they are spawned.)
    pub(super) fn send_outbox<'a>(
        &'a self,
        id: &'a FlowId,
        ttl: Duration,
    ) -> futures_util::future::BoxFuture<'a, Result<usize>> {
        Box::pin(async move {
            let intent = Intent::new(self.namespace(), id);
            self.note_intent(&intent).await?;
            self.send_noted(id, ttl, &intent, Vec::new()).await
        })
    }

    /// The same, its intent noted. For a start's intent, its first steps first: `known`,
    /// from the start's own memory, or, for the sweep of one that died (`known` empty), every
    /// step written sent (`unsent.lua`); then `started.lua`. Then the outbox is read (for the
    /// start only when a step of it was refused, which may have made others ready). The
    /// intent is dropped once all is sent.
    pub(super) async fn send_noted(
        &self,
        id: &FlowId,
        ttl: Duration,
        intent: &Intent,
        known: Vec<Outgoing>,
    ) -> Result<usize> {
        let mut noted = Instant::now();
        let mut sent = 0;
        let mut read = known.is_empty();
        if intent.is_start() {
            // Not marked: they were written sent.
            let mut cursor = (known.is_empty()).then(|| "0".to_string());
            for page in known.chunks(KNOWN_PAGE) {
                self.refresh_intent(intent, &mut noted).await?;
                let (n, refused) = Box::pin(self.send_page(id, ttl, page, false)).await?;
                sent += n;
                read |= refused;
            }
            while let Some(at) = cursor {
                self.refresh_intent(intent, &mut noted).await?;
                let (next, page) = self.unsent_page(id, &at).await?;
                sent += Box::pin(self.send_page(id, ttl, &page, false)).await?.0;
                cursor = (next != "0").then_some(next);
            }
            let keys = self.flow_keys(id);
            self.flow_call(&keys, keys.invoke(&SCRIPTS.started)).await?;
        }
        // A page at a time, each marked sent before the next is read, so that another process
        // sending the same flow's outbox meets few of the same steps. A step its topic refused
        // fails, which may make others ready (behind Ignore edges): those come in a next page.
        while read {
            self.refresh_intent(intent, &mut noted).await?;
            // Boxed: the futures of the calls below nest deep.
            let (n, more) = Box::pin(self.send_outbox_once(id, ttl)).await?;
            sent += n;
            read = n >= OUTBOX_PAGE || more;
        }
        self.drop_intent(intent).await?;
        Ok(sent)
    }

    /// A page of the steps a start that died may not have sent (`unsent.lua`), from `cursor`;
    /// the next cursor ("0" after the last).
    async fn unsent_page(&self, id: &FlowId, cursor: &str) -> Result<(String, Vec<Outgoing>)> {
        let keys = self.flow_keys(id);
        let mut inv = keys.invoke(&SCRIPTS.unsent);
        inv.arg(cursor).arg(UNSENT_PAGE);
        let reply = self.flow_call(&keys, inv).await?;
        let Value::Array(parts) = &reply else {
            return Err(Error::unexpected("flow unsent steps", &reply));
        };
        let next = match parts.first() {
            Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(Value::Int(n)) => n.to_string(),
            _ => return Err(Error::unexpected("flow unsent steps", &reply)),
        };
        let steps = match parts.get(1) {
            Some(Value::Array(list)) => list.iter().filter_map(outgoing).collect(),
            _ => Vec::new(),
        };
        Ok((next, steps))
    }

    /// One round of `send_outbox`: how many were read, and whether to read again although
    /// the page was short (a step was refused, or members not ready any more were dropped).
    async fn send_outbox_once(&self, id: &FlowId, ttl: Duration) -> Result<(usize, bool)> {
        let keys = self.flow_keys(id);
        let mut inv = keys.invoke(&SCRIPTS.outbox);
        inv.arg(OUTBOX_PAGE);
        let reply = self.flow_call(&keys, inv).await?;
        let Value::Array(parts) = reply else {
            return Err(Error::unexpected("flow outbox", &reply));
        };
        let steps: Vec<Outgoing> = match parts.get(1) {
            Some(Value::Array(list)) => list.iter().filter_map(outgoing).collect(),
            _ => Vec::new(),
        };
        let dropped = matches!(parts.get(2), Some(Value::Int(n)) if *n > 0);
        if steps.is_empty() {
            return Ok((0, dropped));
        }
        let (n, refused) = self.send_page(id, ttl, &steps, true).await?;
        Ok((n, refused || dropped))
    }

    /// Sends `steps` (a page), each group of one topic and options in one call, and marks
    /// them sent when `mark` (those of a start were written sent); those their topic refuses
    /// fail. Returns how many, and whether any was refused.
    async fn send_page(
        &self,
        id: &FlowId,
        ttl: Duration,
        steps: &[Outgoing],
        mark: bool,
    ) -> Result<(usize, bool)> {
        let page = steps.len();
        // The steps of one topic with the same options go in one call.
        let mut groups: BTreeMap<(&str, &str), Vec<&Outgoing>> = BTreeMap::new();
        for s in steps {
            groups.entry((&s.topic, &s.options)).or_default().push(s);
        }
        let mut sent: Vec<&Outgoing> = Vec::new();
        let mut refused: Vec<(&Outgoing, String)> = Vec::new();
        let mut first_error = None;
        for ((topic, stored), group) in groups {
            let mut ok: Vec<&Outgoing> = Vec::with_capacity(group.len());
            let result = match options(stored, ttl) {
                Err(e) => {
                    ok = group;
                    Err(e)
                }
                Ok((shared, delay)) => {
                    let mut messages: Vec<Trusted> = Vec::with_capacity(group.len());
                    for s in group {
                        // A stored payload that is not JSON (written by hand) refuses its step.
                        match serde_json::from_str::<&RawValue>(&s.payload) {
                            Ok(_) => {
                                let mid = step_message_id(id, &s.name, s.gen);
                                messages.push((mid, delay, s.payload.clone().into_bytes()));
                                ok.push(s);
                            }
                            Err(e) => refused.push((s, format!("stored payload: {e}"))),
                        }
                    }
                    self.send_trusted(topic, &shared, &messages)
                        .await
                        .map(|_| ())
                }
            };
            match result {
                Ok(()) => sent.extend(ok),
                // Redis did not answer: the steps stay ready, sent again by this sender's
                // next round or, were it to die, by the sweep of its intent.
                Err(e) if transient(&e) => {
                    first_error.get_or_insert(e);
                }
                // Its topic refuses them (a foreign key there, an option it will never take):
                // the steps fail, so that nothing waits for them for ever.
                Err(e) => {
                    let why = format!("cannot be sent to {topic}: {e}");
                    refused.extend(ok.into_iter().map(|s| (s, why.clone())));
                }
            }
        }
        for (step, why) in &refused {
            let end = StepEnd::Failed(why.clone());
            let (fresh, ended) = self.settle_in_flow(id, &step.name, step.gen, &end).await?;
            // Counted as the runtime counts the steps it settles (no-ops without a recorder).
            if fresh {
                metrics::counter!("delayq_flow_steps_total", "topic" => step.topic.clone(), "outcome" => "failed")
                    .increment(1);
            }
            if let Some(state) = ended {
                metrics::counter!("delayq_flows_ended_total", "state" => state).increment(1);
            }
        }
        if mark && !sent.is_empty() {
            self.mark_sent(id, &sent).await?;
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok((page, !refused.is_empty())),
        }
    }

    /// `sent.lua` for `sent`; the messages of those cancelled or run again by retry_flow
    /// before they were marked are cancelled.
    async fn mark_sent(&self, id: &FlowId, sent: &[&Outgoing]) -> Result<()> {
        let keys = self.flow_keys(id);
        let mut inv = keys.invoke(&SCRIPTS.sent);
        inv.arg(sent.len());
        for s in sent {
            inv.arg(&s.name).arg(s.gen);
        }
        let stale = self.flow_call(&keys, inv).await?;
        if let Value::Array(list) = stale {
            for v in &list {
                let Value::Array(pair) = v else { continue };
                let (Some(name), Some(gen)) = (pair.first(), pair.get(1)) else {
                    continue;
                };
                let name: String = redis::from_redis_value(name.clone()).unwrap_or_default();
                let gen: u64 = redis::from_redis_value(gen.clone()).unwrap_or_default();
                if let Some(step) = sent.iter().find(|s| s.name == name && s.gen == gen) {
                    self.cancel(&step.topic, &step_message_id(id, &name, gen))
                        .await?;
                }
            }
        }
        Ok(())
    }
}
