//! Schedules in one process: `#[scheduled]` ticks on their grid, each once and in order; a
//! dynamic schedule sends its payload to an ordinary listener; upsert is idempotent, a changed
//! spec applies from the next tick, removal stops the ticks; bad specs are refused naming the
//! field; the CLI-facing listing reports next, last and the last outcome.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{producer, sleep_ms, wait_until, RedisServer, Seen};
use delayq_runtime::{
    delay_listener, scheduled, CatchUp, Error, Runtime, Schedule, Tick, TickOutcome,
};
use serde::{Deserialize, Serialize};

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

static FAST: Seen<(u64, u32, u64, u64)> = Seen::new();

#[scheduled(name = "sched.fast", every = "200ms")]
async fn fast(tick: Tick) {
    FAST.push((
        ms(tick.scheduled_at()),
        tick.attempt(),
        tick.missed(),
        ms(SystemTime::now()),
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_every_schedule_ticks_on_its_grid_once_each_at_its_time() {
    let server = RedisServer::start();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .schedules(["sched.fast"])
        .spawn()
        .await
        .unwrap();
    let ticks = FAST.wait_for(10, Duration::from_secs(10)).await;
    rt.shutdown().await.unwrap();
    let times: Vec<u64> = ticks.iter().map(|t| t.0).collect();
    for pair in times.windows(2) {
        assert_eq!(pair[1] - pair[0], 200, "ticks off the grid: {times:?}");
    }
    for (at, attempt, missed, ran) in &ticks {
        assert_eq!((*attempt, *missed), (1, 0));
        // Never before its time (Redis' clock is this machine's here), and not much after.
        assert!(ran >= at, "ran at {ran} before its time {at}");
        assert!(ran - at < 150, "ran {} ms late", ran - at);
    }
    let info = producer(&server)
        .await
        .schedule("sched.fast")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.spec, "every 200ms");
    assert!(info.from_code);
    assert!(info.next_at.unwrap() > info.last_at.unwrap());
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Report {
    kind: String,
}

static REPORTS: Seen<(String, u64)> = Seen::new();

#[delay_listener(topic = "sched.reports")]
async fn report(msg: delayq_runtime::Message<Report>) {
    REPORTS.push((msg.payload().kind.clone(), ms(msg.due_at())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_schedule_sends_its_payload_to_a_listener_until_removed() {
    let server = RedisServer::start();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["sched.reports"])
        .spawn()
        .await
        .unwrap();
    let p = rt.producer();
    let every = Schedule::every(Duration::from_millis(300)).unwrap();
    let info = p
        .upsert_schedule(
            "hourly-ish",
            every.clone(),
            "sched.reports",
            &Report { kind: "a".into() },
        )
        .await
        .unwrap();
    assert_eq!(
        (info.topic.as_str(), info.from_code),
        ("sched.reports", false)
    );
    let first_next = info.next_at.unwrap();
    // The same spec again keeps the grid.
    let again = p
        .upsert_schedule(
            "hourly-ish",
            every,
            "sched.reports",
            &Report { kind: "a".into() },
        )
        .await
        .unwrap();
    // The producer may have moved `next` on meanwhile; a reset would start a new grid.
    let moved = ms(again.next_at.unwrap()) - ms(first_next);
    assert_eq!(moved % 300, 0, "the grid moved by {moved} ms");
    let got = REPORTS.wait_for(3, Duration::from_secs(10)).await;
    assert!(got.iter().all(|(k, _)| k == "a"), "{got:?}");
    for pair in got.windows(2) {
        assert_eq!(pair[1].1 - pair[0].1, 300, "{got:?}");
    }
    // A changed spec applies from the next tick.
    p.upsert_schedule(
        "hourly-ish",
        Schedule::every(Duration::from_millis(500)).unwrap(),
        "sched.reports",
        &Report { kind: "b".into() },
    )
    .await
    .unwrap();
    wait_until(Duration::from_secs(10), "two ticks of the new spec", || {
        REPORTS.all().iter().filter(|(k, _)| k == "b").count() >= 2
    })
    .await;
    let b: Vec<u64> = REPORTS
        .all()
        .iter()
        .filter(|(k, _)| k == "b")
        .map(|r| r.1)
        .collect();
    assert_eq!(b[1] - b[0], 500, "{b:?}");
    let listed = p.schedules().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].spec, "every 500ms");
    assert!(p.remove_schedule("hourly-ish").await.unwrap());
    assert!(!p.remove_schedule("hourly-ish").await.unwrap());
    // A tick written ahead (at most a second) may still run; nothing after it.
    sleep_ms(1_500).await;
    let settled = REPORTS.len();
    sleep_ms(1_500).await;
    assert_eq!(REPORTS.len(), settled, "ticks after the removal");
    assert!(p.schedules().await.unwrap().is_empty());
    rt.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_tick_outcome_is_listed() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    // No runtime listens: the first tick is never produced.
    let info = p
        .upsert_schedule(
            "nobody",
            Schedule::cron("0 0 1 1 *")
                .unwrap()
                .tz("Europe/Berlin")
                .unwrap()
                .catch_up(CatchUp::All),
            "sched.nobody",
            &1u8,
        )
        .await
        .unwrap();
    assert_eq!((info.last_at, info.last_outcome), (None, None));
    assert_eq!(info.catch_up, CatchUp::All);
    assert_eq!(info.tz, "Europe/Berlin");
    let _ = TickOutcome::Done;
}

#[tokio::test]
async fn bad_specs_are_refused_naming_the_field() {
    let err = Schedule::cron("0 9 * * FOO").unwrap_err();
    assert!(
        matches!(&err, Error::InvalidSchedule { field, .. } if field == "cron day of week"),
        "{err}"
    );
    let err = Schedule::cron("0 24 * * *").unwrap_err().to_string();
    assert!(err.contains("hour") && err.contains("\"24\""), "{err}");
    let err = Schedule::cron("0 9 * *").unwrap_err().to_string();
    assert!(err.contains("4 fields"), "{err}");
    let err = Schedule::every(Duration::ZERO).unwrap_err().to_string();
    assert!(err.contains("every"), "{err}");
    let err = Schedule::cron("@daily")
        .unwrap()
        .tz("Berlin")
        .unwrap_err()
        .to_string();
    assert!(err.contains("tz") && err.contains("Berlin"), "{err}");
}
