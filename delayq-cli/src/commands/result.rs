//! `delayq result TOPIC ID [--wait D]`: what a message's handler returned, or how it ended.

use std::time::Duration;

use delayq_core::{Outcome as Ended, Producer};
use serde_json::{json, Value};

use super::outcome::{emit, known_topic, message_id, Outcome};
use crate::failure::Failure;

pub(super) async fn run(
    p: &Producer,
    json: bool,
    (topic, id, wait): (String, String, Option<Duration>),
) -> Outcome {
    known_topic(p, &topic).await?;
    let id = message_id(&id)?;
    let ended: Ended<Value> = match wait {
        Some(timeout) => p.wait(&topic, &id, timeout).await?,
        None => p.result(&topic, &id).await?,
    };
    let (word, detail) = match &ended {
        Ended::Done(v) => ("done", json!({ "value": v })),
        Ended::Dead { reason } => ("dead", json!({ "reason": reason })),
        Ended::Cancelled => ("cancelled", json!({})),
        Ended::Pending => ("pending", json!({})),
        Ended::Unknown => {
            return Err(Failure::NotFound(format!(
                "nothing is known of {id} on {topic}: never sent, or its outcome was not kept (a handler that returns no value) or is past result_ttl"
            )))
        }
    };
    let mut out = json!({ "id": id.as_str(), "outcome": word });
    if let (Some(o), Value::Object(d)) = (out.as_object_mut(), detail) {
        o.extend(d);
    }
    emit(json, out, || match &ended {
        Ended::Done(v) => format!("{id}: done {v}"),
        Ended::Dead { reason } => format!("{id}: dead: {reason}"),
        _ => format!("{id}: {word}"),
    })
}
