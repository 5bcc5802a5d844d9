//! An operator's hand on a schedule: suspended, no process produces its ticks (a restart with
//! the `#[scheduled]` fn keeps it suspended, and it never counts as stalled); resumed, it goes
//! on from its next tick after now without catching up what it missed; run now, one extra
//! tick reaches its handler (with a dynamic schedule's payload as stored), suspended or not.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{producer, sleep_ms, RedisServer, Seen};
use delayq_runtime::{
    delay_listener, scheduled, Runtime, RuntimeHandle, Schedule, ScheduleChange, Tick,
};
use serde_json::{json, Value};

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// (scheduled_at, ran at)
static PULSE: Seen<(u64, u64)> = Seen::new();

#[scheduled(name = "ctl.pulse", every = "300ms")]
async fn pulse(tick: Tick) {
    PULSE.push((ms(tick.scheduled_at()), ms(SystemTime::now())));
}

static REPORTS: Seen<Value> = Seen::new();

#[delay_listener(topic = "ctl.reports")]
async fn report(msg: Value) {
    REPORTS.push(msg);
}

async fn start(server: &RedisServer) -> RuntimeHandle {
    Runtime::builder()
        .redis_url(server.url())
        .schedules(["ctl.pulse"])
        .topics(["ctl.reports"])
        .spawn()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_resume_and_run_now_across_processes_and_a_restart() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let a = start(&server).await;
    let b = start(&server).await;
    PULSE.wait_for(3, Duration::from_secs(10)).await;

    assert_eq!(
        p.suspend_schedule("ctl.pulse").await.unwrap(),
        ScheduleChange::Changed
    );
    assert_eq!(
        p.suspend_schedule("ctl.pulse").await.unwrap(),
        ScheduleChange::Unchanged
    );
    // A tick written ahead before the suspension may still run; then nothing.
    sleep_ms(1_000).await;
    let seen = PULSE.len();
    sleep_ms(2_000).await;
    assert_eq!(
        PULSE.len(),
        seen,
        "ticks while suspended: {:?}",
        PULSE.all()
    );
    let info = p.schedule("ctl.pulse").await.unwrap().unwrap();
    assert!(
        info.suspended && !info.stalled && info.next_at.is_none(),
        "{info:?}"
    );
    assert!(p.stalled_schedules().await.unwrap().is_empty());

    // A restart upserts the fn's schedule: it stays suspended.
    a.shutdown().await.unwrap();
    let a = start(&server).await;
    sleep_ms(1_500).await;
    assert_eq!(PULSE.len(), seen, "a restart resumed it: {:?}", PULSE.all());
    assert!(p.schedule("ctl.pulse").await.unwrap().unwrap().suspended);

    // Run now, while suspended: one tick, at about now, to one handler.
    let before = ms(SystemTime::now());
    let id = p.run_schedule_now("ctl.pulse").await.unwrap().unwrap();
    PULSE.wait_for(seen + 1, Duration::from_secs(5)).await;
    sleep_ms(1_000).await;
    let ran = PULSE.all();
    assert_eq!(ran.len(), seen + 1, "{ran:?}");
    let (at, _) = ran[seen];
    assert!(
        at.abs_diff(before) < 2_000,
        "run now at {at}, asked at {before} ({id})"
    );

    // Resumed after 4.5 s suspended (15 ticks missed): on from the next tick after now, none
    // of the missed ones caught up.
    let resumed_at = ms(SystemTime::now());
    assert_eq!(
        p.resume_schedule("ctl.pulse").await.unwrap(),
        ScheduleChange::Changed
    );
    assert_eq!(
        p.resume_schedule("ctl.pulse").await.unwrap(),
        ScheduleChange::Unchanged
    );
    let after = PULSE.wait_for(seen + 5, Duration::from_secs(10)).await;
    let new: Vec<u64> = after[seen + 1..].iter().map(|(at, _)| *at).collect();
    assert!(
        new.iter().all(|at| *at >= resumed_at),
        "caught up missed ticks: {new:?} (resumed at {resumed_at})"
    );
    for pair in new.windows(2) {
        assert_eq!(pair[1] - pair[0], 300, "off the grid after resume: {new:?}");
    }
    let info = p.schedule("ctl.pulse").await.unwrap().unwrap();
    assert!(!info.suspended && info.next_at.is_some(), "{info:?}");

    // A dynamic schedule run now: its payload as stored, to its topic's listener.
    p.upsert_schedule(
        "ctl.weekly",
        Schedule::cron("0 9 * * MON").unwrap(),
        "ctl.reports",
        &json!({"report": "weekly", "z": 1, "a": [1, 2]}),
    )
    .await
    .unwrap();
    p.run_schedule_now("ctl.weekly").await.unwrap().unwrap();
    let got = REPORTS.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(got[0], json!({"report": "weekly", "z": 1, "a": [1, 2]}));
    // Unknown names.
    assert_eq!(
        p.suspend_schedule("ctl.nope").await.unwrap(),
        ScheduleChange::NotFound
    );
    assert_eq!(
        p.resume_schedule("ctl.nope").await.unwrap(),
        ScheduleChange::NotFound
    );
    assert_eq!(p.run_schedule_now("ctl.nope").await.unwrap(), None);
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}
