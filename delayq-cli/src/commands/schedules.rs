//! `delayq schedules [remove|suspend|resume|run NAME]`.

use std::time::SystemTime;

use delayq_core::Producer;
use serde_json::json;

use super::outcome::{emit, warn_unreadable, Outcome};
use crate::args::ScheduleCommand;
use crate::failure::Failure;
use crate::namespace::{all_schedules, change_schedule, ScheduleAction};
use crate::report::{self, table};

/// `delayq schedules` (a table, or JSON) and `delayq schedules remove NAME`.
pub(super) async fn run(p: &Producer, json: bool, action: Option<ScheduleCommand>) -> Outcome {
    let act = match &action {
        Some(ScheduleCommand::Suspend { name }) => Some((name, ScheduleAction::Suspend)),
        Some(ScheduleCommand::Resume { name }) => Some((name, ScheduleAction::Resume)),
        Some(ScheduleCommand::Run { name }) => Some((name, ScheduleAction::Run)),
        _ => None,
    };
    if let Some((name, act)) = act {
        let outcome = change_schedule(p, name, act).await?;
        emit(
            json,
            json!({ "schedule": name, "outcome": outcome }),
            || format!("{name}: {}", outcome.replace('_', " ")),
        )?;
        return Ok(());
    }
    if let Some(ScheduleCommand::Remove { name, force }) = action {
        let not_found = || {
            Failure::NotFound(format!(
                "no schedule {name:?} in namespace {:?}",
                p.namespace()
            ))
        };
        let Some(info) = p.schedule(&name).await? else {
            return Err(not_found());
        };
        if info.from_code && !force {
            return Err(Failure::Usage(format!(
                "schedule {name:?} belongs to a #[scheduled] fn: the next runtime start that has \
                 the fn writes it again. Remove the fn (or switch it off with enabled = false), \
                 or pass --force to remove the schedule until then"
            )));
        }
        if !p.remove_schedule(&name).await? {
            return Err(not_found());
        }
        let comes_back = info.from_code.then_some(
            " (a #[scheduled] fn's: it comes back when a runtime that has the fn starts)",
        );
        emit(
            json,
            json!({ "removed": name, "from_code": info.from_code }),
            || format!("removed schedule {name}{}", comes_back.unwrap_or_default()),
        )?;
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
    )?;
    Ok(())
}
