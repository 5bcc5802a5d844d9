//! Starting the tick writer of schedules: upsert the `#[scheduled]` fns' schedules, write the
//! ticks due now, then keep writing them a little ahead of their time.

use delayq_core::{Result, Schedule};

use super::context::Spawning;
use crate::delay::ListenerRegistration;
use crate::options::ListenerOptions;
use crate::schedule::{Producing, ScheduleRegistration, TickWriter};

/// Upserts the schedules of the selected `#[scheduled]` fns and, when this runtime listens on
/// any topic (`listeners`), writes the ticks due now (a catch-up after an outage) before any
/// listener claims: the tick writer to start, if any.
pub(super) async fn prepare(
    s: &Spawning,
    schedules: &[(&'static ScheduleRegistration, Schedule, ListenerOptions)],
    listeners: &[(&'static ListenerRegistration, ListenerOptions)],
) -> Result<Option<TickWriter>> {
    for (r, schedule, _) in schedules {
        s.producer.upsert_code_schedule(r.name, schedule).await?;
    }
    if listeners.is_empty() {
        return Ok(None);
    }
    let producing = Producing {
        code: schedules.iter().map(|(r, ..)| r.name.to_string()).collect(),
        topics: listeners.iter().map(|(r, _)| r.topic.to_string()).collect(),
    };
    Ok(Some(
        TickWriter::first_pass(s.producer.clone(), producing).await?,
    ))
}

/// Starts the tick writer.
pub(super) fn start(s: &mut Spawning, ticks: Option<TickWriter>) {
    if let Some(ticks) = ticks {
        let stop = s.stop.clone();
        s.spawn(ticks.run(stop));
    }
}
