//! Waiting rooms the runtime ticks (`Runtime::builder().waiting_room(..)`): one process of
//! the namespace at a time admits, under the room's lease (the loop is the shared
//! `crate::under_lease`), and each tick checks in Redis that its leadership is still current.

use std::time::Duration;

use delayq_core::{Leadership, WaitingRoom};
use tokio_util::sync::CancellationToken;

use crate::handler::HandlerFuture;
use crate::under_lease::run_under_lease;

/// The shortest ticking lease of a room (three ticks, at least this).
const ROOM_MIN_LEASE: Duration = Duration::from_secs(1);

/// Ticks waiting room `room` under its lease until `stop`: one process of the namespace at
/// a time admits, and each tick checks in Redis that its leadership is still current.
pub(crate) async fn tick_room(room: WaitingRoom, stop: CancellationToken) {
    let every = room.config().tick_every();
    let ttl = (every * 3).max(ROOM_MIN_LEASE);
    let lease = match room.lease(ttl) {
        Ok(lease) => lease,
        Err(error) => {
            tracing::error!(%error, room = room.name(), "waiting room cannot tick");
            return;
        }
    };
    let name = format!("room {}", room.name());
    let tick = move |leadership: Leadership| -> HandlerFuture {
        let room = room.clone();
        Box::pin(async move {
            match room.admit_as(&leadership).await {
                Ok(Some(report)) => {
                    if report.admitted > 0 || report.expired_waiting > 0 {
                        tracing::debug!(
                            room = room.name(),
                            admitted = report.admitted,
                            expired = report.expired_waiting,
                            "tick"
                        );
                    }
                    Ok(())
                }
                Ok(None) => Err("the room's lease was lost; this tick admitted nobody".into()),
                Err(e) => Err(e.to_string()),
            }
        })
    };
    run_under_lease(&name, lease, every, tick, stop).await;
}
