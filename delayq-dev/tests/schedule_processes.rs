//! Schedules across real processes (`delayq-test-streams` with a `#[scheduled(every = "1s")]`
//! fn): three processes run each tick exactly once, also while one is SIGKILLed and another
//! starts; and after every process was stopped through at least five ticks, each catch-up
//! policy holds when they start again.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq_core::CatchUp;
use delayq_dev::{ConsumerProcess, RedisServer, Role, ScheduleTick};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn start(role: Role, server: &RedisServer, dir: &Path, ledger: &Path, n: usize) -> ConsumerProcess {
    ConsumerProcess::start_as(role, &server.url(), ledger, 0, &dir.join(format!("log{n}")))
}

fn wait_for_ticks(ledger: &Path, n: usize, limit: Duration) -> Vec<ScheduleTick> {
    let deadline = Instant::now() + limit;
    loop {
        let ticks = ScheduleTick::read_all(ledger);
        if ticks.len() >= n {
            return ticks;
        }
        assert!(
            Instant::now() < deadline,
            "waited {limit:?} for {n} ticks, have {}",
            ticks.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Each tick's time once, in order, with no gap of more than one interval.
fn assert_each_once_without_gaps(ticks: &[ScheduleTick]) {
    let mut times: Vec<u64> = ticks.iter().map(|t| t.scheduled_ms).collect();
    let ran = times.len();
    times.sort_unstable();
    times.dedup();
    assert_eq!(times.len(), ran, "a tick ran twice: {ticks:?}");
    for pair in times.windows(2) {
        assert_eq!(pair[1] - pair[0], 1_000, "a tick is missing: {times:?}");
    }
}

#[test]
fn three_processes_run_each_tick_once_while_one_is_killed_and_another_starts() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let role = Role::Schedule(CatchUp::Last);
    let mut procs: Vec<ConsumerProcess> = (0..3)
        .map(|n| start(role, &server, dir.path(), &ledger, n))
        .collect();
    let started = Instant::now();
    wait_for_ticks(&ledger, 6, Duration::from_secs(20));
    // SIGKILL the process that ran the latest tick (every process races to write each tick;
    // this one is as likely as any to have written the next).
    let latest = ScheduleTick::read_all(&ledger).last().copied().unwrap();
    let victim = procs.iter().position(|p| p.pid() == latest.pid).unwrap();
    procs[victim].kill9();
    procs.push(start(role, &server, dir.path(), &ledger, 3));
    while started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    for p in procs {
        p.stop();
    }
    let ticks = ScheduleTick::read_all(&ledger);
    let pids: std::collections::BTreeSet<u32> = ticks.iter().map(|t| t.pid).collect();
    println!(
        "{} ticks in 20 s, run by {} processes, {} after a retry",
        ticks.len(),
        pids.len(),
        ticks.iter().filter(|t| t.attempt > 1).count()
    );
    assert!(ticks.len() >= 18, "{} ticks in 20 s", ticks.len());
    assert_each_once_without_gaps(&ticks);
    assert!(ticks.iter().all(|t| t.missed == 0), "{ticks:?}");
}

/// Runs the policy's schedule in two processes until 3 ticks ran, stops both (SIGTERM), waits
/// `outage`, starts two again and waits for 3 more ticks. Returns the ticks before the stop,
/// those after, and when the processes started again.
fn through_an_outage(
    policy: CatchUp,
    outage: Duration,
) -> (Vec<ScheduleTick>, Vec<ScheduleTick>, u64) {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let role = Role::Schedule(policy);
    let first: Vec<ConsumerProcess> = (0..2)
        .map(|n| start(role, &server, dir.path(), &ledger, n))
        .collect();
    wait_for_ticks(&ledger, 3, Duration::from_secs(20));
    for p in first {
        p.stop();
    }
    let before = ScheduleTick::read_all(&ledger);
    std::thread::sleep(outage);
    let restarted = now_ms();
    let again: Vec<ConsumerProcess> = (2..4)
        .map(|n| start(role, &server, dir.path(), &ledger, n))
        .collect();
    wait_for_ticks(&ledger, before.len() + 3, Duration::from_secs(20));
    for p in again {
        p.stop();
    }
    // By tick time: two processes may run the catch-up tick and the next one at the same
    // moment, so the ledger's order is not the ticks' order.
    let mut after = ScheduleTick::read_all(&ledger)[before.len()..].to_vec();
    after.sort_by_key(|t| t.scheduled_ms);
    (before, after, restarted)
}

/// The outage: long enough that at least five ticks are more than a second late at restart.
const OUTAGE: Duration = Duration::from_millis(6_500);

#[test]
fn catch_up_last_runs_the_latest_missed_tick_once() {
    let (before, after, restarted) = through_an_outage(CatchUp::Last, OUTAGE);
    let last_before = before.last().unwrap().scheduled_ms;
    let first = after[0];
    // The first tick after the outage is the latest of those missed: late, and it says how
    // many were skipped before it (every tick between goes unrun).
    let skipped = (first.scheduled_ms - last_before) / 1_000 - 1;
    println!(
        "last: skipped {skipped}, then ran the tick of {} ms before the restart",
        restarted as i64 - first.scheduled_ms as i64
    );
    assert!(skipped >= 4, "{skipped} skipped: {after:?}");
    assert_eq!(first.missed, skipped, "{after:?}");
    assert!(
        first.scheduled_ms + 1_000 < restarted,
        "not a missed tick: {first:?} (restart {restarted})"
    );
    assert_each_once_without_gaps(&after);
    assert!(after[1..].iter().all(|t| t.missed == 0));
}

#[test]
fn catch_up_none_skips_every_missed_tick_and_says_so() {
    let (before, after, restarted) = through_an_outage(CatchUp::None, OUTAGE);
    let last_before = before.last().unwrap().scheduled_ms;
    let first = after[0];
    let skipped = (first.scheduled_ms - last_before) / 1_000 - 1;
    println!(
        "none: skipped {skipped}; the first tick after ran {} ms after the restart",
        first.scheduled_ms as i64 - restarted as i64
    );
    assert!(skipped >= 5, "{skipped} skipped: {after:?}");
    assert_eq!(first.missed, skipped, "{after:?}");
    // Nothing older than a second before the restart ran.
    assert!(
        first.scheduled_ms + 1_000 >= restarted,
        "a missed tick ran: {first:?} (restart {restarted})"
    );
    assert_each_once_without_gaps(&after);
}

#[test]
fn catch_up_all_runs_every_missed_tick_once_in_order() {
    let (before, after, _) = through_an_outage(CatchUp::All, OUTAGE);
    let mut all = before.clone();
    all.extend(&after);
    println!("all: {} ticks after the outage", after.len());
    assert!(after.len() >= 3);
    assert_each_once_without_gaps(&all);
    assert!(all.iter().all(|t| t.missed == 0));
    let first_after = after[0].scheduled_ms - before.last().unwrap().scheduled_ms;
    assert_eq!(first_after, 1_000, "the first missed tick did not run");
}
