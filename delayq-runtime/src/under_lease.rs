//! Running a body under a leader lease (leader tasks, waiting-room ticks): contend for the
//! lease on a timer; the holder renews it every third of its ttl and runs the body every
//! `every`, one run at a time. A confirmation of the lease
//! holds for its ttl counted from when the request was sent (less a margin), so a late reply
//! proves nothing; losing the lease, or failing to confirm it before that runs out, stops new
//! runs at once and drops a running body at its next await (see `run_under_lease`).

use std::time::Duration;

use delayq_core::{LeaderLease, Leadership};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::handler::HandlerFuture;
use crate::health::Health;

/// How long a confirmation holds: the lease's ttl, counted from when the confirming request
/// was sent, less this share of it. Redis counts the ttl from when it ran the request, later
/// than the send; the margin covers a late timer and a scheduler that runs us late.
const MARGIN_DIVISOR: u32 = 10;

/// How long a stopping loop waits for the reply to an acquire it already sent.
const STOP_WAIT: Duration = Duration::from_secs(1);

/// While holding `lease`, runs `task` every `every` (one run at a time), until `stop`.
///
/// A lease counts as held until `sent + ttl - ttl/10`, where `sent` is when the request that
/// confirmed it (acquire or renew) was sent: a reply that arrives after that proves nothing,
/// since another may have taken the lease meanwhile. A run starts only on a lease held by
/// that count, and a running body is dropped (at its next await) when the lease is known
/// lost or its confirmation runs out before a renewal confirms it again. A leadership this
/// loop stops trusting is released (compare-and-DEL), so that it neither blocks another
/// contender nor is renewed by a request whose reply comes too late.
pub(crate) async fn run_under_lease(
    name: &str,
    lease: LeaderLease,
    every: Duration,
    task: impl Fn(Leadership) -> HandlerFuture,
    stop: CancellationToken,
) {
    let ttl = lease.ttl();
    let holds_for = ttl - ttl / MARGIN_DIVISOR;
    let health = Health::new(format!("leader task {name}"));
    // The leadership and until when its last confirmation holds.
    let mut leading: Option<(Leadership, Instant)> = None;
    let mut next_run = Instant::now();
    let mut running: Option<JoinHandle<()>> = None;
    loop {
        // When another holds the lease: try again the moment it lapses (within ttl/3).
        let mut retry_in = ttl / 3;
        let sent = Instant::now();
        // A renewal that cannot be confirmed while the last confirmation holds is no renewal.
        let held_until = leading.as_ref().map(|(_, until)| *until);
        let outcome = {
            let attempt = async {
                match &leading {
                    None => lease.acquire_or_wait().await.map(|r| match r {
                        Ok(l) => Some(l),
                        Err(left) => {
                            retry_in = retry_in.min(left + Duration::from_millis(1));
                            None
                        }
                    }),
                    Some((l, _)) => lease.renew().await.map(|ok| ok.then(|| l.clone())),
                }
            };
            tokio::pin!(attempt);
            tokio::select! {
                held = &mut attempt => Some(held),
                _ = sleep_until_some(held_until) => None,
                _ = stop.cancelled() => {
                    // A request already sent may take the lease after the stop: wait briefly
                    // for its reply, so that the lease knows it holds it and releases it
                    // below, instead of blocking the next leader until its ttl runs out.
                    let _ = tokio::time::timeout(STOP_WAIT, &mut attempt).await;
                    break;
                }
            }
        };
        let confirmed_until = sent + holds_for;
        let late = Instant::now() >= confirmed_until;
        match outcome {
            Some(Ok(Some(now_leading))) if !late => {
                if leading.is_none() {
                    tracing::info!(
                        task = name,
                        token = now_leading.token(),
                        "became the leader"
                    );
                    next_run = Instant::now();
                }
                leading = Some((now_leading, confirmed_until));
                health.ok();
            }
            Some(Ok(Some(stale))) => {
                tracing::warn!(
                    task = name,
                    token = stale.token(),
                    after = ?sent.elapsed(),
                    "the lease was confirmed too late to count; giving it up"
                );
                stand_down(&mut leading, &mut running);
                give_up(&lease, &stop).await;
                health.ok();
            }
            Some(Ok(None)) => {
                if let Some((lost, _)) = &leading {
                    tracing::warn!(task = name, token = lost.token(), "lost the leader lease");
                }
                stand_down(&mut leading, &mut running);
                health.ok();
            }
            Some(Err(error)) => health.failed(&error),
            None => {}
        }
        if let Some((l, until)) = &leading {
            if Instant::now() >= *until {
                tracing::warn!(
                    task = name,
                    token = l.token(),
                    "the lease could not be confirmed in time; stopping as leader"
                );
                stand_down(&mut leading, &mut running);
                give_up(&lease, &stop).await;
            }
        }
        let idle = running.as_ref().is_none_or(JoinHandle::is_finished);
        if let (Some((leader, _)), true) = (&leading, idle) {
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
        let wake = match &leading {
            // Renew a third of the ttl after the last confirmation was asked for.
            Some((_, until)) => {
                let renew_at = (sent + retry_in).max(Instant::now());
                let renew_at = renew_at.min(*until);
                if idle {
                    renew_at.min(next_run)
                } else {
                    renew_at
                }
            }
            None => Instant::now() + retry_in,
        };
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = stop.cancelled() => break,
        }
    }
    if let Some(run) = running {
        run.abort();
    }
    // Releases whatever the lease holds (nothing, and no call, when it holds nothing).
    let _ = lease.release().await;
}

/// Stops leading: forgets the leadership and drops a running body at its next await.
fn stand_down(leading: &mut Option<(Leadership, Instant)>, running: &mut Option<JoinHandle<()>>) {
    *leading = None;
    if let Some(run) = running.take() {
        run.abort();
    }
}

/// Releases a lease this loop no longer trusts, so a late renewal cannot keep it alive and
/// the next attempt is a fresh acquire; gives up waiting for the reply when the runtime stops.
async fn give_up(lease: &LeaderLease, stop: &CancellationToken) {
    tokio::select! {
        _ = lease.release() => {}
        _ = stop.cancelled() => {}
    }
}

/// Sleeps until `until`, or forever when there is none.
async fn sleep_until_some(until: Option<Instant>) {
    match until {
        Some(until) => tokio::time::sleep_until(until).await,
        None => std::future::pending().await,
    }
}
