//! `delayq schedules [remove NAME]`.

use std::time::SystemTime;

use delayq_core::Producer;
use serde_json::json;

use super::outcome::{emit, warn_unreadable, Outcome};
use crate::args::ScheduleCommand;
use crate::failure::Failure;
use crate::namespace::all_schedules;
use crate::report::{self, table};

/// `delayq schedules` (a table, or JSON) and `delayq schedules remove NAME`.
pub(super) async fn run(p: &Producer, json: bool, action: Option<ScheduleCommand>) -> Outcome {
    if let Some(ScheduleCommand::Remove { name }) = action {
        if !p.remove_schedule(&name).await? {
            return Err(Failure::NotFound(format!(
                "no schedule {name:?} in namespace {:?}",
                p.namespace()
            )));
        }
        emit(json, json!({ "removed": name }), || {
            format!("removed schedule {name}")
        });
        return Ok(());
    }
    let all = all_schedules(p).await?;
    warn_unreadable(&all, "schedules");
    let now = SystemTime::now();
    emit(
        json,
        json!(all
            .iter()
            .map(|e| e.json("schedule", report::schedule_json))
            .collect::<Vec<_>>()),
        || {
            let mut t = table(report::SCHEDULES_HEADER);
            for e in &all {
                t.add_row(match &e.read {
                    Ok(s) => report::schedule_row(s, now),
                    Err(why) => report::error_row(&e.name, why, report::SCHEDULES_HEADER.len()),
                });
            }
            t.to_string()
        },
    );
    Ok(())
}
