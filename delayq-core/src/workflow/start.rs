//! Starting a flow, sending its ready steps, and settling a step whose message ended: each a
//! script on one side and idempotent calls between (see `mod.rs`).

use std::time::Duration;

use futures_util::StreamExt;
use redis::Value;
use serde_json::value::RawValue;

use super::build::{Flow, FLOW_TTL};
use super::check::check;
use super::keys::{index_key, step_message_id, FlowId, FlowKeys, SCRIPTS};
use super::settle::StepEnd;
use crate::delay::{Priority, SendOptions};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;
use crate::time::millis;

/// A flow whose start did not finish (its first steps never sent) is removed after this (and
/// its steps' longest delay).
const START_GRACE: Duration = Duration::from_secs(24 * 3600);
/// Steps sent at once.
const SEND_CONCURRENCY: usize = 64;
/// Steps read from the outbox at once (sent, then marked sent, before the next page).
const OUTBOX_PAGE: usize = 64;

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
struct Outgoing {
    name: String,
    gen: u64,
    topic: String,
    options: serde_json::Value,
    payload: String,
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
        options: serde_json::from_str(&text(3)?).ok()?,
        payload: text(4)?,
    })
}

impl Producer {
    pub(super) fn flow_keys(&self, id: &FlowId) -> FlowKeys {
        FlowKeys::new(&self.conn, self.namespace(), id)
    }

    /// Field `field` of the flow meta key `meta`.
    pub(super) async fn meta_field(&self, meta: &str, field: &str) -> Result<Option<String>> {
        let value = self
            .conn
            .run(|mut c| async move {
                redis::cmd("HGET")
                    .arg(meta)
                    .arg(field)
                    .query_async::<Option<String>>(&mut c)
                    .await
            })
            .await?;
        Ok(value)
    }

    /// How long flow `id` is kept once it ended (its `ttl`, the default when unreadable).
    pub(super) async fn flow_ttl(&self, id: &FlowId) -> Result<Duration> {
        let ttl = self.meta_field(self.flow_keys(id).meta(), "ttl").await?;
        Ok(ttl
            .and_then(|t| t.parse().ok())
            .map_or(FLOW_TTL, Duration::from_millis))
    }

    pub(super) async fn flow_call(&self, inv: redis::ScriptInvocation<'static>) -> Result<Value> {
        self.conn
            .run(|mut c| {
                let inv = &inv;
                async move { inv.invoke_async(&mut c).await }
            })
            .await
            .map_err(Error::Redis)
    }

    /// Starts `flow`: every step is written, or none (a bad flow is refused before anything
    /// is written, naming the step); then the steps that wait for nothing are sent.
    ///
    /// # Errors
    /// [`Error::InvalidFlow`](crate::Error::InvalidFlow) naming what is wrong (a cycle, with
    /// its steps; an unknown or duplicate step; an invalid topic; a payload over the limit;
    /// more than [`MAX_FLOW_STEPS`](crate::MAX_FLOW_STEPS) steps);
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn start_flow(&self, flow: Flow) -> Result<FlowId> {
        let ttl = flow.ttl.unwrap_or(FLOW_TTL);
        // A start that died after sending some steps: the record lasts until the latest of
        // them is due, and an hour more (the first to end keeps it for good).
        let latest = flow.steps.iter().map(|s| s.delay).max().unwrap_or_default();
        let grace = START_GRACE.saturating_add(latest);
        let steps = check(flow, self.max_payload())?;
        let id = FlowId(MessageId::generate().to_string());
        let keys = self.flow_keys(&id);
        let mut inv = keys.invoke(&SCRIPTS.create);
        inv.arg(millis(ttl)).arg(millis(grace)).arg(steps.len());
        for s in &steps {
            inv.arg(&s.name).arg(&s.record).arg(s.deps).arg(&s.payload);
        }
        let reply = self.flow_call(inv).await?;
        if !matches!(&reply, Value::SimpleString(s) if s == "created")
            && !matches!(&reply, Value::BulkString(b) if b == b"created")
        {
            return Err(Error::unexpected("create flow", &reply));
        }
        // Indexed before its steps go out, so that `delayq flows` shows whatever was started.
        let now = crate::time::time_to_ms(std::time::SystemTime::now());
        let index = index_key(self.namespace());
        self.conn
            .run(|mut c| {
                let (index, id) = (&index, id.as_str());
                async move {
                    redis::cmd("ZADD")
                        .arg(index)
                        .arg(now)
                        .arg(id)
                        .query_async::<()>(&mut c)
                        .await
                }
            })
            .await?;
        // A start whose sends fail is undone as far as it can be: what it sent is cancelled,
        // so that the caller, who gets the error and no id, can start it again.
        if let Err(e) = self.send_outbox(&id, ttl).await {
            let _ = self.cancel_flow(&id).await;
            return Err(e);
        }
        Ok(id)
    }

    /// Sends the flow's ready steps (each under its step id, reserved for `ttl` once it ends,
    /// so a second send is a duplicate) and marks them sent.
    pub(super) async fn send_outbox(&self, id: &FlowId, ttl: Duration) -> Result<usize> {
        let mut sent = 0;
        // A page at a time, each marked sent before the next is read, so that another process
        // sending the same flow's outbox (a step that ended meanwhile) meets few of the same
        // steps. A step its topic refused fails, which may make others ready (behind Ignore
        // edges): those come in a next page.
        loop {
            let (n, more) = self.send_outbox_once(id, ttl).await?;
            sent += n;
            if n < OUTBOX_PAGE && !more {
                return Ok(sent);
            }
        }
    }

    /// One round of `send_outbox`: how many were read, and whether to read again although
    /// the page was short (a step was refused, or members not ready any more were dropped).
    async fn send_outbox_once(&self, id: &FlowId, ttl: Duration) -> Result<(usize, bool)> {
        let keys = self.flow_keys(id);
        let mut inv = keys.invoke(&SCRIPTS.outbox);
        inv.arg(OUTBOX_PAGE);
        let reply = self.flow_call(inv).await?;
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
        let page = steps.len();
        let sends = steps
            .iter()
            .cloned()
            .map(|s| async move { (self.send_step(id.clone(), s.clone(), ttl).await, s) });
        let results: Vec<(Result<()>, Outgoing)> = futures_util::stream::iter(sends)
            .buffer_unordered(SEND_CONCURRENCY)
            .collect()
            .await;
        let mut sent = Vec::new();
        let mut first_error = None;
        let mut refused = false;
        for (result, step) in results {
            match result {
                Ok(()) => sent.push(step),
                // Redis did not answer: the step stays ready, sent again by the next settle
                // or sweep.
                Err(e) if transient(&e) => {
                    first_error.get_or_insert(e);
                }
                // Its topic refuses it (a foreign key there, an option it will never take):
                // the step fails, so that nothing waits for it for ever.
                Err(e) => {
                    refused = true;
                    let why = format!("cannot be sent to {}: {e}", step.topic);
                    self.settle_in_flow(id, &step.name, step.gen, &StepEnd::Failed(why))
                        .await?;
                }
            }
        }
        if !sent.is_empty() {
            let mut inv = keys.invoke(&SCRIPTS.sent);
            inv.arg(sent.len());
            for s in &sent {
                inv.arg(&s.name).arg(s.gen);
            }
            // Sent meanwhile, but cancelled or run again by retry_flow before they were marked:
            // their messages are cancelled.
            let stale = self.flow_call(inv).await?;
            if let Value::Array(list) = stale {
                for v in &list {
                    if let Value::Array(pair) = v {
                        let (Some(name), Some(gen)) = (pair.first(), pair.get(1)) else {
                            continue;
                        };
                        let name: String =
                            redis::from_redis_value(name.clone()).unwrap_or_default();
                        let gen: u64 = redis::from_redis_value(gen.clone()).unwrap_or_default();
                        if let Some(step) = sent.iter().find(|s| s.name == name && s.gen == gen) {
                            self.cancel(&step.topic, &step_message_id(id, &name, gen))
                                .await?;
                        }
                    }
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok((page, refused || dropped)),
        }
    }

    async fn send_step(&self, id: FlowId, s: Outgoing, ttl: Duration) -> Result<()> {
        let id = &id;
        {
            let o = &s.options;
            let mut options = SendOptions::new()
                .delay(Duration::from_millis(o["delay_ms"].as_u64().unwrap_or(0)))
                .id(step_message_id(id, &s.name, s.gen).as_str())
                .dedup_for(ttl);
            options.trusted_id = true;
            if let Some(p) = o["priority"].as_u64() {
                options = options.priority(Priority::Level(p.min(255) as u8));
            }
            if let Some(k) = o["key"].as_str() {
                options = options.key(k);
            }
            if let Some(n) = o["max_attempts"].as_u64() {
                options = options.max_attempts(n as u32);
            }
            let payload =
                RawValue::from_string(s.payload.clone()).map_err(|e| Error::InvalidFlow {
                    reason: format!("step {:?}: stored payload: {e}", s.name),
                })?;
            self.send_with(&s.topic, &*payload, options)
                .await
                .map(|_| ())
        }
    }
}
