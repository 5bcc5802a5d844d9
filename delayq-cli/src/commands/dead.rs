//! `delayq dead list|show|replay|purge`.

use std::time::SystemTime;

use delayq_core::Producer;
use serde_json::json;

use super::outcome::{emit, known_topic, message_id, Outcome};
use crate::args::{DeadCommand, DeadTarget};
use crate::failure::Failure;
use crate::namespace::{change_dead, DeadAction};
use crate::report::{self, table};

pub(super) async fn run(p: &Producer, json: bool, command: DeadCommand) -> Outcome {
    let now = SystemTime::now();
    match command {
        DeadCommand::List { topic, limit } => {
            known_topic(p, &topic).await?;
            let letters = p.dead_letters(&topic, 0..limit).await?;
            emit(
                json,
                json!(letters.iter().map(report::dead_json).collect::<Vec<_>>()),
                || {
                    let mut t = table(report::DEAD_HEADER);
                    for d in &letters {
                        t.add_row(report::dead_row(d, now));
                    }
                    t.to_string()
                },
            )?;
        }
        DeadCommand::Show { topic, id } => {
            known_topic(p, &topic).await?;
            let id = message_id(&id)?;
            let Some(letter) = p.dead_letter(&topic, &id).await? else {
                return Err(Failure::Failed(format!("{id} is not dead on {topic}")));
            };
            emit(json, report::dead_json(&letter), || {
                report::dead_detail(&letter, now).to_string()
            })?;
        }
        DeadCommand::Replay(target) => dead_change(p, json, DeadAction::Replay, target).await?,
        DeadCommand::Purge(target) => dead_change(p, json, DeadAction::Purge, target).await?,
    }
    Ok(())
}

async fn dead_change(p: &Producer, json: bool, action: DeadAction, target: DeadTarget) -> Outcome {
    let DeadTarget { topic, id, all } = target;
    known_topic(p, &topic).await?;
    let id = match (id, all) {
        (_, true) => None,
        (Some(id), false) => Some(message_id(&id)?),
        (None, false) => return Err(Failure::Usage("name an id, or --all".into())),
    };
    let n = change_dead(p, &topic, id.as_ref(), action).await?;
    let done = action.done();
    emit(json, json!({"topic": topic, done: n}), || {
        format!("{done} {n} on {topic}")
    })?;
    Ok(())
}
