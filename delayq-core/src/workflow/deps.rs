//! What the steps a flow step waited for ended with: their states and kept values, read when
//! the step runs (a listener's `Dependencies` parameter).

use std::collections::BTreeMap;

use super::keys::{parse_step_id, step_message_id};
use super::read::{parse_state, StepState};
use crate::delay::{Outcome, TopicKeys};
use crate::error::Result;
use crate::id::MessageId;
use crate::producer::Producer;

/// Ids one read of kept values takes.
const READ_CHUNK: usize = 500;

/// One step a flow step waited for, as it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// Its name.
    pub name: String,
    /// Its topic.
    pub topic: String,
    /// How it stands: `Done`, or `Failed` behind an Ignore edge (the step runs anyway).
    pub state: StepState,
    /// Why it failed; for a done step, `returned nothing` when its handler returned no value.
    pub reason: Option<String>,
    /// The value its handler returned (JSON), while its topic keeps it (`result_ttl`).
    pub value: Option<Vec<u8>>,
}

impl Producer {
    /// The steps that the flow step whose message is `id` waited for, with their states and
    /// kept values, by name; empty for a message that is not a flow step's.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses a call.
    pub async fn step_dependencies(&self, id: &MessageId) -> Result<Vec<Dependency>> {
        let Some((flow, name, _)) = parse_step_id(id.as_str()) else {
            return Ok(Vec::new());
        };
        let keys = self.flow_keys(&flow);
        let (rec, state) = (keys.rec().to_string(), keys.state().to_string());
        let record: Option<String> = self
            .conn
            .run(|mut c| {
                let (rec, name) = (&rec, &name);
                async move {
                    redis::cmd("HGET")
                        .arg(rec)
                        .arg(name)
                        .query_async(&mut c)
                        .await
                }
            })
            .await?;
        let (_, after) = record
            .map(|r| super::check::parse_record(&r))
            .unwrap_or_default();
        let names: Vec<String> = after
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e[0].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        // Their states, and their topics (from their own records).
        let (states, recs): (Vec<Option<String>>, Vec<Option<String>>) = self
            .conn
            .run(|mut c| {
                let (state, rec, names) = (&state, &rec, &names);
                async move {
                    redis::pipe()
                        .cmd("HMGET")
                        .arg(state)
                        .arg(names)
                        .cmd("HMGET")
                        .arg(rec)
                        .arg(names)
                        .query_async(&mut c)
                        .await
                }
            })
            .await?;
        let mut deps = Vec::new();
        // Topic → (index in deps, message id) of each done dependency, to read its value.
        let mut wanted: BTreeMap<String, Vec<(usize, MessageId)>> = BTreeMap::new();
        for ((dep, st), rec) in names.iter().zip(states).zip(recs) {
            let topic = rec
                .map(|r| super::check::parse_record(&r).0)
                .and_then(|r| r["topic"].as_str().map(String::from))
                .unwrap_or_default();
            let raw = st.unwrap_or_default();
            // One that does not read (a hand edit) counts as waiting: it has not ended.
            let (state, gen, reason) = parse_state(&raw)
                .map_or((StepState::Waiting, 0, ""), |k| (k.state, k.gen, k.reason));
            if state == StepState::Done && !topic.is_empty() {
                wanted
                    .entry(topic.clone())
                    .or_default()
                    .push((deps.len(), step_message_id(&flow, dep, gen)));
            }
            deps.push(Dependency {
                name: dep.clone(),
                topic,
                state,
                reason: (!reason.is_empty()).then(|| reason.to_string()),
                value: None,
            });
        }
        for (topic, list) in wanted {
            let keys = TopicKeys::on(&self.conn, self.namespace(), &topic)?;
            for chunk in list.chunks(READ_CHUNK) {
                let ids: Vec<MessageId> = chunk.iter().map(|(_, id)| id.clone()).collect();
                let got = crate::delay::outcomes_of(&self.conn, &keys, &ids).await?;
                for ((i, _), outcome) in chunk.iter().zip(got) {
                    if let Outcome::Done(v) = outcome {
                        deps[*i].value = Some(v);
                    }
                }
            }
        }
        Ok(deps)
    }
}

impl crate::delay::TopicQueue {
    /// What the flow step whose message `id` is (of this topic) waited for ended with (see
    /// [`Producer::step_dependencies`]).
    ///
    /// # Errors
    /// As [`Producer::step_dependencies`].
    pub async fn step_dependencies(&self, id: &MessageId) -> Result<Vec<Dependency>> {
        self.producer().step_dependencies(id).await
    }
}

impl Producer {
    /// Adds step `name` (`payload` to `topic`, ready at once) to the flow of the running flow
    /// step whose message is `from`: every step that waits for `from`'s step waits for the
    /// new one too, under the same edge policy (a fan-out known only when the step runs).
    /// `false` when a step of that name exists already (a retried run adding again).
    ///
    /// # Errors
    /// [`Error::InvalidFlow`](crate::Error::InvalidFlow) when `from` is not a flow step's
    /// message, its flow is not running, or the step is bad (its name, topic, payload);
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses a call.
    pub async fn add_flow_step<T: serde::Serialize + ?Sized>(
        &self,
        from: &MessageId,
        name: &str,
        topic: &str,
        payload: &T,
    ) -> Result<bool> {
        let refuse = |reason: String| crate::error::Error::InvalidFlow { reason };
        let Some((flow, parent, gen)) = parse_step_id(from.as_str()) else {
            return Err(refuse(format!(
                "{from} is not a flow step's message: only a flow step adds steps"
            )));
        };
        // The builder's checks, for a flow of this one step.
        let checked = super::check::check(
            super::Flow::new().step(name, topic, payload),
            self.max_payload(),
        )?;
        let step = checked.into_iter().next().expect("one step checked");
        let keys = self.flow_keys(&flow);
        let mut inv = keys.invoke(&super::keys::SCRIPTS.add);
        inv.arg(&parent)
            .arg(name)
            .arg(&step.record)
            .arg(&step.payload)
            .arg(gen)
            .arg(super::MAX_FLOW_STEPS);
        let reply = self.flow_call(&keys, inv).await?;
        let word: String = redis::from_redis_value(reply).unwrap_or_default();
        let added = match word.as_str() {
            "added" => true,
            // Added by an earlier run of this step: sent (again) all the same, in case that
            // run died before it sent it.
            "exists" => false,
            "taken" => {
                return Err(refuse(format!(
                    "flow {flow} has a step {name:?} already, not added by {parent:?}"
                )))
            }
            "gone" => {
                return Err(refuse(format!(
                    "flow {flow} is not running: no step is added"
                )))
            }
            "stale" => {
                return Err(refuse(format!(
                    "step {parent:?} of flow {flow} is not running this run (it ended, or was run again): it adds no step"
                )))
            }
            "full" => {
                return Err(refuse(format!(
                    "flow {flow} has {} steps, the most a flow may have",
                    super::MAX_FLOW_STEPS
                )))
            }
            _ => return Err(refuse(format!("flow {flow} has no step {parent:?}"))),
        };
        let ttl = self.flow_ttl(&flow).await?;
        self.send_outbox(&flow, ttl).await?;
        Ok(added)
    }
}

impl crate::delay::TopicQueue {
    /// See [`Producer::add_flow_step`].
    ///
    /// # Errors
    /// As [`Producer::add_flow_step`].
    pub async fn add_flow_step<T: serde::Serialize + ?Sized>(
        &self,
        from: &MessageId,
        name: &str,
        topic: &str,
        payload: &T,
    ) -> Result<bool> {
        self.producer()
            .add_flow_step(from, name, topic, payload)
            .await
    }
}
