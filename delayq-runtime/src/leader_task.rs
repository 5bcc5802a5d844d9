//! Leader tasks: each contends for its lease on a timer; the holder renews it every third of
//! its ttl and runs the task every `every`, one run at a time. Losing the lease (a stall
//! longer than the ttl, Redis trouble) stops new runs at once; a run in progress sees it in
//! `Leadership::is_current()`.

use std::time::Duration;

use delayq_core::{LeaderLease, Leadership, Producer, WaitingRoom};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::handler::HandlerFuture;
use crate::health::Health;
use crate::registry::LeaderTaskRegistration;

/// The shortest ticking lease of a room (three ticks, at least this).
const ROOM_MIN_LEASE: Duration = Duration::from_secs(1);

/// Runs one `#[leader_task]` until `stop`, then releases the lease if it holds it.
pub(crate) async fn run(
    registration: &'static LeaderTaskRegistration,
    producer: Producer,
    stop: CancellationToken,
) {
    let ttl = Duration::from_millis(registration.ttl_ms);
    let every = Duration::from_millis(registration.every_ms);
    let lease = match LeaderLease::new(&producer, registration.name, ttl) {
        Ok(lease) => lease,
        Err(error) => {
            tracing::error!(%error, task = registration.name, "leader task cannot run");
            return;
        }
    };
    let task = (registration.task)();
    lead(registration.name, lease, every, move |l| task(l), stop).await;
}

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
    lead(&name, lease, every, tick, stop).await;
}

/// While holding `lease`, runs `task` every `every` (one run at a time), until `stop`.
async fn lead(
    name: &str,
    lease: LeaderLease,
    every: Duration,
    task: impl Fn(Leadership) -> HandlerFuture,
    stop: CancellationToken,
) {
    let ttl = lease.ttl();
    let health = Health::new(format!("leader task {name}"));
    let mut leading: Option<Leadership> = None;
    let mut next_run = Instant::now();
    let mut running: Option<JoinHandle<()>> = None;
    let mut confirmed = Instant::now();
    loop {
        // When another holds the lease: try again the moment it lapses (within ttl/3).
        let mut retry_in = ttl / 3;
        let held = match &leading {
            None => lease.acquire_or_wait().await.map(|r| match r {
                Ok(l) => Some(l),
                Err(left) => {
                    retry_in = retry_in.min(left + Duration::from_millis(1));
                    None
                }
            }),
            Some(l) => lease.renew().await.map(|ok| ok.then(|| l.clone())),
        };
        match held {
            Ok(Some(now_leading)) => {
                if leading.is_none() {
                    tracing::info!(
                        task = name,
                        token = now_leading.token(),
                        "became the leader"
                    );
                    next_run = Instant::now();
                }
                leading = Some(now_leading);
                confirmed = Instant::now();
                health.ok();
            }
            Ok(None) => {
                if let Some(lost) = leading.take() {
                    tracing::warn!(task = name, token = lost.token(), "lost the leader lease");
                }
                health.ok();
            }
            Err(error) => {
                health.failed(&error);
                // Unconfirmed for a whole ttl: the lease has lapsed, another may lead.
                if confirmed.elapsed() >= ttl {
                    leading = None;
                }
            }
        }
        let idle = running.as_ref().is_none_or(JoinHandle::is_finished);
        if let (Some(leader), true) = (&leading, idle) {
            if Instant::now() >= next_run {
                next_run = Instant::now() + every;
                let run = task(leader.clone());
                let name = name.to_string();
                running = Some(tokio::spawn(async move {
                    if let Err(error) = run.await {
                        tracing::warn!(task = name, %error, "leader task failed");
                    }
                }));
            }
        }
        let renew_at = Instant::now() + retry_in;
        let wake = if leading.is_some() && idle {
            renew_at.min(next_run)
        } else {
            renew_at
        };
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = stop.cancelled() => break,
        }
    }
    if let Some(run) = running {
        run.abort();
    }
    if leading.is_some() {
        let _ = lease.release().await;
    }
}
