//! The boss's sleep until the next due time: precise to tens of microseconds, cut short by a
//! wake-up, moved by another process's announcement that it took what was due (see `Race`).

use std::time::Duration;

use tokio::time::Instant;

use super::topic::TopicRuntime;

/// How long a boss with nothing due sleeps before looking again, in case a wake-up was lost.
pub(crate) const BOSS_SAFETY_SLEEP: Duration = Duration::from_secs(300);
/// The last part of a boss's sleep to a due time, slept precisely (see `sleep_to_due`).
const PRECISE_TAIL: Duration = Duration::from_millis(3);
/// How much later than the due time a boss claims when another process took the last due
/// time it woke for: the one that claims first announces what it took (pub/sub, well under a
/// millisecond on one network), so the others sleep on to the next due time instead of all
/// claiming for nothing. Only when that one stops claiming (it stopped, or has no free slot)
/// does a due message wait this long.
const DEFER: Duration = Duration::from_millis(30);
/// An announcement this close (Redis' clock) to an empty claim at a due time says another
/// process took that due time.
const RACE_WINDOW_US: u64 = 50_000;

/// What a boss knows of the race for due times with other processes' bosses.
#[derive(Default)]
pub(super) struct Race {
    /// Another process took the last due time this boss woke for: claim `DEFER` late.
    pub(super) defer: bool,
    /// Redis' time (µs) of this boss's last claim, and whether it came back empty at a due
    /// time.
    pub(super) claimed_us: u64,
    pub(super) lost: bool,
    /// The last claim left due messages to the rate limit: sleep to its time, not woken by
    /// sends.
    pub(super) deaf: bool,
}

/// When Redis' `due_ms` comes here, given Redis' time `now_us` was `then` here; the safety
/// sleep when nothing waits.
pub(super) fn local_time(due_ms: Option<u64>, (now_us, then): (u64, Instant)) -> Instant {
    match due_ms {
        Some(due) => {
            let remaining = Duration::from_micros((due * 1000).saturating_sub(now_us));
            then + remaining.min(BOSS_SAFETY_SLEEP)
        }
        None => then + BOSS_SAFETY_SLEEP,
    }
}

/// The boss's sleep until the next due time; `true` when it ends there (not woken). tokio's
/// timer wakes up to a millisecond or two late, so the last few milliseconds are slept on a
/// blocking-pool thread, whose sleep is precise to tens of microseconds. Wake-ups still
/// interrupt the long part; an announcement that a claim (here or elsewhere) took what was
/// due moves the sleep to the next due time it names, with no call.
pub(super) async fn sleep_to_due(
    topic: &TopicRuntime,
    mut deadline: Instant,
    clock: (u64, Instant),
    race: &mut Race,
) -> bool {
    loop {
        let target = if race.defer {
            deadline + DEFER
        } else {
            deadline
        };
        if let Some(coarse) = target.checked_sub(PRECISE_TAIL) {
            if coarse > Instant::now() {
                tokio::select! {
                    _ = tokio::time::sleep_until(coarse) => {}
                    _ = topic.wake_boss.notified(), if !race.deaf => return false,
                    _ = topic.rouse.notified(), if race.deaf => return false,
                    _ = topic.claimed.notified() => {
                        let (next_ms, at_us) = topic.claimed_next();
                        if race.lost && at_us.abs_diff(race.claimed_us) < RACE_WINDOW_US {
                            race.defer = true;
                        }
                        // Only news after this boss's own last claim moves its sleep. It also
                        // ends a wait on the rate limit: another process claimed, perhaps the
                        // last due message, and then stopped or filled its slots; sends must be
                        // heard again (at most one empty claim per announcement, until this
                        // boss's next claim finds the limit again).
                        if at_us > race.claimed_us {
                            deadline = local_time(next_ms, clock);
                            race.deaf = false;
                        }
                        continue;
                    }
                    _ = topic.stop.cancelled() => return false,
                }
            }
        }
        let tail = target.saturating_duration_since(Instant::now());
        if !tail.is_zero() {
            let _ = tokio::task::spawn_blocking(move || std::thread::sleep(tail)).await;
        }
        return true;
    }
}
