//! Starting a flow: written all or nothing, indexed, then its first steps sent (`outbox.rs`).

use std::time::Duration;

use redis::Value;

use super::build::{Flow, FLOW_TTL};
use super::check::check;
use super::intent::{name_foreign, Intent};
use super::keys::{index_key, FlowId, FlowKeys, SCRIPTS};
use super::outbox::Outgoing;
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;
use crate::time::millis;

/// A flow whose start did not finish (its first steps never sent) is removed after this (and
/// its steps' longest delay).
const START_GRACE: Duration = Duration::from_secs(24 * 3600);

impl Producer {
    pub(super) fn flow_keys(&self, id: &FlowId) -> FlowKeys {
        FlowKeys::new(&self.conn, self.namespace(), id)
    }

    /// How long flow `id` is kept once it ended (its `ttl`, the default when unreadable).
    pub(super) async fn flow_ttl(&self, id: &FlowId) -> Result<Duration> {
        let ttl = self.hget(self.flow_keys(id).meta(), "ttl").await?;
        Ok(ttl
            .and_then(|t| t.parse().ok())
            .map_or(FLOW_TTL, Duration::from_millis))
    }

    /// A script on the flow of `keys`; a WRONGTYPE is traced to the key of the flow that
    /// holds a foreign value, so the error names it.
    pub(super) async fn flow_call(
        &self,
        keys: &FlowKeys,
        inv: redis::ScriptInvocation<'static>,
    ) -> Result<Value> {
        let result = self
            .conn
            .run(|mut c| {
                let inv = &inv;
                async move { inv.invoke_async(&mut c).await }
            })
            .await;
        match result {
            Ok(v) => Ok(v),
            Err(e) => Err(super::intent::name_foreign(&self.conn, &keys.typed(), e).await),
        }
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
        let reply = self.flow_call(&keys, inv).await?;
        if !matches!(&reply, Value::SimpleString(s) if s == "created")
            && !matches!(&reply, Value::BulkString(b) if b == b"created")
        {
            return Err(Error::unexpected("create flow", &reply));
        }
        // Indexed before its steps go out, so that `delayq flows` shows whatever was started;
        // with the intent to send them (both in the flows' slot: one round trip).
        let now = crate::time::time_to_ms(std::time::SystemTime::now());
        let index = index_key(self.namespace());
        let intent = Intent::start(self.namespace(), &id);
        let noted = self
            .conn
            .run(|mut c| {
                let (index, id, intent) = (&index, id.as_str(), &intent);
                async move {
                    redis::pipe()
                        .cmd("ZADD")
                        .arg(index)
                        .arg(now)
                        .arg(id)
                        .ignore()
                        .cmd("ZADD")
                        .arg(&intent.key)
                        .arg(intent.until())
                        .arg(&intent.member)
                        .ignore()
                        .query_async::<()>(&mut c)
                        .await
                }
            })
            .await;
        // A foreign value at either key (a hand edit): the flow is undone, the key named.
        if let Err(e) = noted {
            let e = name_foreign(&self.conn, &[(&index, "zset"), (&intent.key, "zset")], e).await;
            let _ = self.cancel_flow(&id).await;
            return Err(e);
        }
        // The steps that wait for nothing, sent from what was just written (not read back).
        let first: Vec<Outgoing> = steps
            .into_iter()
            .filter(|s| s.deps == 0)
            .map(|s| {
                let (rec, _) = super::check::parse_record(&s.record);
                Outgoing {
                    name: s.name,
                    gen: 0,
                    topic: rec["topic"].as_str().unwrap_or_default().to_string(),
                    options: rec["opts"].to_string(),
                    payload: String::from_utf8_lossy(&s.payload).into_owned(),
                }
            })
            .collect();
        // A start whose sends fail is undone as far as it can be: what it sent is cancelled,
        // so that the caller, who gets the error and no id, can start it again.
        if let Err(e) = self.send_noted(&id, ttl, &intent, first).await {
            let _ = self.cancel_flow(&id).await;
            return Err(e);
        }
        Ok(id)
    }
}
