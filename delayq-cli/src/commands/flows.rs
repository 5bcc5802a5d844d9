//! `delayq flows [--state S]` and `delayq flow show|retry|cancel ID`.

use delayq_core::{FlowId, FlowState, Producer};
use serde_json::json;

use super::outcome::{emit, Outcome};
use crate::args::FlowCommand;
use crate::failure::Failure;
use crate::report::{flow_json, flow_tree};

fn flow_id(id: &str) -> Result<FlowId, Failure> {
    Ok(FlowId::new(id)?)
}

pub(super) async fn list(p: &Producer, json: bool, state: Option<String>, limit: usize) -> Outcome {
    let wanted = match state.as_deref() {
        None => None,
        Some(s) => Some(
            [
                FlowState::Running,
                FlowState::Done,
                FlowState::Failed,
                FlowState::Cancelled,
            ]
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                Failure::Usage(format!(
                    "--state {s:?}: expected running, done, failed or cancelled"
                ))
            })?,
        ),
    };
    let flows: Vec<(FlowId, FlowState)> = p.flows(wanted, limit).await?;
    emit(
        json,
        json!(flows
            .iter()
            .map(|(id, s)| json!({"id": id.as_str(), "state": s.name()}))
            .collect::<Vec<_>>()),
        || {
            if flows.is_empty() {
                return "no flows".to_string();
            }
            flows
                .iter()
                .map(|(id, s)| format!("{id}  {}", s.name()))
                .collect::<Vec<_>>()
                .join("\n")
        },
    )
}

pub(super) async fn run(p: &Producer, json: bool, command: FlowCommand) -> Outcome {
    match command {
        FlowCommand::Show { id } => {
            let id = flow_id(&id)?;
            let Some(f) = p.flow(&id).await? else {
                return Err(Failure::NotFound(format!(
                    "no flow {id} (never started, or removed after its ttl)"
                )));
            };
            emit(json, flow_json(&f), || flow_tree(&f))
        }
        FlowCommand::Retry { id } => {
            let id = flow_id(&id)?;
            match p.retry_flow(&id).await? {
                None => Err(Failure::NotFound(format!("no flow {id}"))),
                Some(0) => Err(Failure::Failed(format!(
                    "{id}: no step failed or was cancelled; nothing to retry"
                ))),
                Some(n) => emit(json, json!({"id": id.as_str(), "retried": n}), || {
                    format!("{id}: {n} steps run again")
                }),
            }
        }
        FlowCommand::Cancel { id } => {
            let id = flow_id(&id)?;
            if p.cancel_flow(&id).await? {
                emit(
                    json,
                    json!({"id": id.as_str(), "outcome": "cancelled"}),
                    || format!("{id}: cancelled"),
                )
            } else {
                Err(Failure::Failed(format!(
                    "{id} is not running (ended, or no such flow); nothing changed"
                )))
            }
        }
    }
}
