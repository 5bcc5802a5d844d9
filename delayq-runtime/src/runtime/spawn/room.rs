//! Starting the waiting rooms the runtime ticks.

use std::time::Duration;

use delayq_core::{Result, RoomConfig, WaitingRoom};

use super::context::Spawning;
use crate::room;

/// Checks and registers each room (before anything runs): the rooms with their tick period.
pub(super) async fn prepare(
    s: &Spawning,
    rooms: &[(String, RoomConfig)],
) -> Result<Vec<(WaitingRoom, Duration)>> {
    let mut out = Vec::new();
    for (name, config) in rooms {
        let room = WaitingRoom::new(&s.producer, name, *config)?;
        room.register().await?;
        out.push((room, config.tick_every()));
    }
    Ok(out)
}

/// Starts ticking each room under its lease.
pub(super) fn start(s: &mut Spawning, rooms: Vec<(WaitingRoom, Duration)>) {
    for (room, tick) in rooms {
        tracing::info!(
            room = %room.name(),
            tick = %delayq_core::config::format_duration(tick),
            "ticking the waiting room"
        );
        let stop = s.stop.clone();
        s.spawn(room::tick_room(room, stop));
    }
}
