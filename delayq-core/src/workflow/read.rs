//! Reading flows: [`FlowInfo`] (`Producer::flow`), the namespace's flows, and `wait_flow`.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::build::OnFailure;
use super::keys::FlowId;
use crate::error::{Error, Result};
use crate::producer::Producer;
use crate::time::ms_to_time;

/// How a flow stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowState {
    /// Steps wait, are ready or run.
    Running,
    /// Every step ended, none failed behind a Fail edge.
    Done,
    /// A step failed and a step (or the flow) needed it: some step will never run.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl FlowState {
    pub(super) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => FlowState::Running,
            "done" => FlowState::Done,
            "failed" => FlowState::Failed,
            "cancelled" => FlowState::Cancelled,
            _ => return None,
        })
    }

    /// The state's name (`running`, `done`, `failed`, `cancelled`).
    pub fn name(self) -> &'static str {
        match self {
            FlowState::Running => "running",
            FlowState::Done => "done",
            FlowState::Failed => "failed",
            FlowState::Cancelled => "cancelled",
        }
    }
}

/// How a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepState {
    /// It waits for steps it needs.
    Waiting,
    /// Ready: being sent to its topic.
    Ready,
    /// Its message is in its topic (delayed, due or running).
    Sent,
    /// Its handler succeeded.
    Done,
    /// Dead, or a step it needed failed (then it never ran).
    Failed,
    /// Cancelled with the flow.
    Cancelled,
}

impl StepState {
    pub(super) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "waiting" => StepState::Waiting,
            "ready" => StepState::Ready,
            "sent" => StepState::Sent,
            "done" => StepState::Done,
            "failed" => StepState::Failed,
            "cancelled" => StepState::Cancelled,
            _ => return None,
        })
    }

    /// The state's name.
    pub fn name(self) -> &'static str {
        match self {
            StepState::Waiting => "waiting",
            StepState::Ready => "ready",
            StepState::Sent => "sent",
            StepState::Done => "done",
            StepState::Failed => "failed",
            StepState::Cancelled => "cancelled",
        }
    }
}

/// One step of a flow as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepInfo {
    /// Its name.
    pub name: String,
    /// Its topic.
    pub topic: String,
    /// How it stands.
    pub state: StepState,
    /// Its run: 0, then one more each time `retry_flow` runs it again.
    pub gen: u64,
    /// The steps it waits for, with each edge's policy.
    pub after: Vec<(String, OnFailure)>,
    /// Why it failed; for a done step, `returned nothing` when its handler returned no value.
    pub reason: Option<String>,
    /// When it was sent, and when it ended (Redis' clock).
    pub sent_at: Option<SystemTime>,
    /// When it ended.
    pub ended_at: Option<SystemTime>,
    /// Its message's id in its topic (for `find` and `result`).
    pub message_id: crate::id::MessageId,
}

/// A flow as it stands: `Producer::flow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowInfo {
    /// Its id.
    pub id: FlowId,
    /// How it stands.
    pub state: FlowState,
    /// Why it failed (the first failing step and its reason).
    pub reason: Option<String>,
    /// When it was started, and when it ended.
    pub created_at: SystemTime,
    /// When it ended.
    pub ended_at: Option<SystemTime>,
    /// Its steps, sorted by name.
    pub steps: Vec<StepInfo>,
}

/// A step's state as the scripts keep it: `<state> <gen> <sent ms> <ended ms>\n<reason>`.
pub(super) struct KeptState<'a> {
    pub(super) state: StepState,
    pub(super) gen: u64,
    pub(super) sent_ms: u64,
    pub(super) ended_ms: u64,
    pub(super) reason: &'a str,
}

/// `raw` read as a [`KeptState`]; `None` when it is not one (a hand edit).
pub(super) fn parse_state(raw: &str) -> Option<KeptState<'_>> {
    let (head, reason) = raw.split_once('\n').unwrap_or((raw, ""));
    let mut f = head.split(' ');
    let state = StepState::parse(f.next()?)?;
    let gen = f.next()?.parse().ok()?;
    let mut ms = || f.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    let (sent_ms, ended_ms) = (ms(), ms());
    Some(KeptState {
        state,
        gen,
        sent_ms,
        ended_ms,
        reason,
    })
}

fn when(ms: Option<&String>) -> Option<SystemTime> {
    ms.and_then(|m| m.parse::<u64>().ok())
        .filter(|&m| m > 0)
        .map(ms_to_time)
}

impl Producer {
    /// How flow `id` stands, each step with its state; `None` when there is no such flow
    /// (never started, or removed `ttl` after it ended).
    ///
    /// # Errors
    /// [`Error::InvalidFlow`](crate::Error::InvalidFlow) when its record is not delayq's (a
    /// hand edit), naming the key; [`Error::Redis`](crate::Error::Redis).
    pub async fn flow(&self, id: &FlowId) -> Result<Option<FlowInfo>> {
        let keys = self.flow_keys(id);
        let (meta, recs, states): (
            HashMap<String, String>,
            HashMap<String, String>,
            HashMap<String, String>,
        ) = self
            .conn
            .run(|mut c| {
                let keys = &keys;
                async move {
                    redis::pipe()
                        .cmd("HGETALL")
                        .arg(keys.meta())
                        .cmd("HGETALL")
                        .arg(keys.rec())
                        .cmd("HGETALL")
                        .arg(keys.state())
                        .query_async(&mut c)
                        .await
                }
            })
            .await?;
        let Some(state) = meta.get("state") else {
            return Ok(None);
        };
        let bad = |what: String| Error::InvalidFlow {
            reason: format!("flow {id}: {what} in {} is not delayq's", keys.meta()),
        };
        let state = FlowState::parse(state).ok_or_else(|| bad(format!("state {state:?}")))?;
        let mut steps = Vec::new();
        let mut names: Vec<&String> = states.keys().collect();
        names.sort();
        for name in names {
            let Some(kept) = parse_state(&states[name]) else {
                return Err(bad(format!("step {name:?}")));
            };
            let (rec, after) = recs
                .get(name)
                .map(|r| super::check::parse_record(r))
                .unwrap_or_default();
            let after = after
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|e| {
                            let policy = if e[1] == "ignore" {
                                OnFailure::Ignore
                            } else {
                                OnFailure::Fail
                            };
                            Some((e[0].as_str()?.to_string(), policy))
                        })
                        .collect()
                })
                .unwrap_or_default();
            steps.push(StepInfo {
                name: name.clone(),
                topic: rec["topic"].as_str().unwrap_or_default().to_string(),
                state: kept.state,
                gen: kept.gen,
                after,
                reason: (!kept.reason.is_empty()).then(|| kept.reason.to_string()),
                sent_at: (kept.sent_ms > 0).then(|| ms_to_time(kept.sent_ms)),
                ended_at: (kept.ended_ms > 0).then(|| ms_to_time(kept.ended_ms)),
                message_id: super::keys::step_message_id(id, name, kept.gen),
            });
        }
        Ok(Some(FlowInfo {
            id: id.clone(),
            state,
            reason: meta.get("reason").cloned(),
            created_at: when(meta.get("created")).unwrap_or(SystemTime::UNIX_EPOCH),
            ended_at: when(meta.get("ended")),
            steps,
        }))
    }

    /// Waits at most `timeout` for flow `id` to end: its state then (`Running` when the
    /// timeout passed first). A flow that failed ends the wait at once, other steps still
    /// running or not. `None`: no such flow.
    ///
    /// # Errors
    /// As [`flow`](Producer::flow).
    pub async fn wait_flow(&self, id: &FlowId, timeout: Duration) -> Result<Option<FlowState>> {
        let now = tokio::time::Instant::now();
        let deadline = now
            .checked_add(timeout)
            .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400));
        let keys = self.flow_keys(id);
        let meta = keys.meta().to_string();
        // Asleep until the flow's end is announced (or the deadline): no polling.
        let state = self
            .watch_field(keys.end(), (&meta, "state", "running"), deadline)
            .await?;
        match state {
            None => Ok(None),
            Some(s) => FlowState::parse(&s)
                .map(Some)
                .ok_or_else(|| Error::InvalidFlow {
                    reason: format!("flow {id}: state {s:?} in {meta} is not delayq's"),
                }),
        }
    }
}
