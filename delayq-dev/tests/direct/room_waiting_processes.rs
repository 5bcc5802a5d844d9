//! Two runtime processes tick one waiting room; the leader is killed with SIGKILL mid-run.
//! From the room's own log of ticks: never more than `admit_per_tick` a tick in total, and
//! the other process takes over within the lease.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{producer, ConsumerProcess, RedisServer, Role, PROC_ROOM};
use delayq_runtime::WaitingRoom;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_room_ticked_by_two_processes_never_over_admits_and_survives_a_killed_leader() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let room = WaitingRoom::new(&p, "proc.room", PROC_ROOM).unwrap();
    for _ in 0..3_000 {
        room.enter().await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("unused");
    let mut a = ConsumerProcess::start_as(
        Role::Room,
        &server.url(),
        &ledger,
        0,
        &dir.path().join("a.log"),
    );
    // A alone: it leads.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while room.counts().await.unwrap().active < 10 {
        assert!(std::time::Instant::now() < deadline, "A never ticked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let b = ConsumerProcess::start_as(
        Role::Room,
        &server.url(),
        &ledger,
        0,
        &dir.path().join("b.log"),
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let killed_ms = now_ms();
    a.kill9();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    b.stop();

    let ticks: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg("delayq:{room:proc.room}:admits")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut server.connection())
        .unwrap();
    let ticks: Vec<(u64, u64)> = ticks
        .iter()
        .map(|(member, ms)| {
            (
                *ms as u64,
                member.rsplit(':').next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    let total: u64 = ticks.iter().map(|t| t.1).sum();
    let active = room.counts().await.unwrap().active;
    assert_eq!(total, active, "the tick log accounts for every admission");
    assert!(
        ticks.iter().all(|t| t.1 <= 5),
        "a tick over admit_per_tick: {ticks:?}"
    );
    let closest = ticks.windows(2).map(|w| w[1].0 - w[0].0).min().unwrap();
    assert!(
        closest >= 50,
        "two ticks {closest} ms apart (tick 100 ms): two processes admitted at once"
    );
    let after: Vec<u64> = ticks
        .iter()
        .map(|t| t.0)
        .filter(|ms| *ms > killed_ms)
        .collect();
    let takeover = after.first().map(|ms| ms - killed_ms);
    println!(
        "{} ticks, {total} admitted, ticks at least {closest} ms apart; first tick {takeover:?} ms after the leader was killed",
        ticks.len()
    );
    let takeover = takeover.expect("no tick after the kill");
    assert!(
        takeover <= 1_300,
        "lease 1 s: took over after {takeover} ms"
    );
    assert!(after.len() >= 10, "B kept ticking: {} ticks", after.len());
}
