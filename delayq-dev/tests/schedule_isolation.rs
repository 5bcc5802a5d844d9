//! One schedule's trouble stays its own: a record broken by hand neither stops a runtime's
//! start nor the schedules after it (it shows in health and in `schedules()`), a broken `next`
//! costs at most a command a second, and a change is read without re-reading every record.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{producer, sleep_ms, wait_until, RedisServer, Seen};
use delayq_runtime::{delay_listener, Runtime, Schedule};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn hset(server: &RedisServer, key: &str, field: &str, value: &str) {
    let _: () = redis::cmd("HSET")
        .arg(key)
        .arg(field)
        .arg(value)
        .query(&mut server.connection())
        .unwrap();
}

/// Every command Redis ran but the test's own and the index reads (`GET` of the version and
/// `ZRANGEBYSCORE` of the change log: every upsert in this test process, of any test, wakes
/// every runtime in it to look, one round trip each).
fn total(calls: &HashMap<String, u64>) -> u64 {
    calls
        .iter()
        .filter(|(c, _)| {
            !c.starts_with("info")
                && !c.starts_with("config")
                && !["get", "zrangebyscore"].contains(&c.as_str())
        })
        .map(|(_, n)| n)
        .sum()
}

/// (schedule payload, due ms, delivered ms) of the ticks of `iso.jobs`.
static JOBS: Seen<(String, u64, u64)> = Seen::new();

#[delay_listener(topic = "iso.jobs")]
async fn job(msg: delayq_runtime::Message<String>) {
    JOBS.push((msg.payload().clone(), ms(msg.due_at()), now_ms()));
}

fn ticks_of(name: &str) -> usize {
    JOBS.all().iter().filter(|(n, ..)| n == name).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_record_is_skipped_and_shown_never_blocking_start_or_the_others() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let every = Schedule::every(Duration::from_millis(300)).unwrap();
    for name in ["a-good", "b-broken", "c-good"] {
        p.upsert_schedule(name, every.clone(), "iso.jobs", &name.to_string())
            .await
            .unwrap();
    }
    // A zone with a trailing space, as a hand edit might leave it.
    hset(
        &server,
        "delayq:{iso.jobs}:schedule:b-broken",
        "tz",
        "Europe/Kyiv ",
    );

    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["iso.jobs"])
        .spawn()
        .await
        .expect("a broken record must not stop the runtime's start");
    wait_until(
        Duration::from_secs(10),
        "ticks of both good schedules",
        || ticks_of("a-good") >= 2 && ticks_of("c-good") >= 2,
    )
    .await;
    assert_eq!(ticks_of("b-broken"), 0);

    // Broken while running (a kind no delayq knows, and `next` moved, so that the runtime
    // reads the record again at its next write), with a schedule sorted after it upserted.
    hset(
        &server,
        "delayq:{iso.jobs}:schedule:a-good",
        "kind",
        "sometimes",
    );
    hset(&server, "delayq:{iso.jobs}:schedule:a-good", "next", "0");
    p.upsert_schedule("d-later", every.clone(), "iso.jobs", &"d-later".to_string())
        .await
        .unwrap();
    wait_until(
        Duration::from_secs(10),
        "ticks of the schedule upserted after",
        || ticks_of("d-later") >= 2,
    )
    .await;
    let c_before = ticks_of("c-good");
    wait_until(Duration::from_secs(10), "c-good going on", || {
        ticks_of("c-good") >= c_before + 2
    })
    .await;

    // Health names both, with why; readiness is not taken away by a record.
    let health = rt.health().await;
    let failing: Vec<(&str, &str)> = health
        .failing_schedules
        .iter()
        .map(|f| (f.name.as_str(), f.error.as_str()))
        .collect();
    assert_eq!(failing.len(), 2, "{failing:?}");
    assert_eq!(failing[0].0, "a-good");
    assert!(failing[0].1.contains("sometimes"), "{failing:?}");
    assert_eq!(failing[1].0, "b-broken");
    assert!(failing[1].1.contains("Kyiv"), "{failing:?}");
    assert!(health.ready, "{health:?}");

    // schedules() lists every one, the broken ones with their error.
    let listed = p
        .schedules()
        .await
        .expect("one bad record must not fail the listing");
    let errors: Vec<(String, bool)> = listed
        .iter()
        .map(|s| (s.name.clone(), s.error.is_some()))
        .collect();
    assert_eq!(
        errors,
        [
            ("a-good".to_string(), true),
            ("b-broken".to_string(), true),
            ("c-good".to_string(), false),
            ("d-later".to_string(), false),
        ]
    );
    assert_eq!(listed[1].tz, "Europe/Kyiv ");

    // Mended by hand (no upsert): taken up again, and health clears.
    hset(
        &server,
        "delayq:{iso.jobs}:schedule:b-broken",
        "tz",
        "Europe/Kyiv",
    );
    wait_until(
        Duration::from_secs(10),
        "ticks of the mended schedule",
        || ticks_of("b-broken") >= 1,
    )
    .await;
    let failing: Vec<String> = rt
        .health()
        .await
        .failing_schedules
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(failing, ["a-good"]);
    rt.shutdown().await.unwrap();
}

static NEXT: Seen<u64> = Seen::new();

#[delay_listener(topic = "iso.next")]
async fn next_job(msg: delayq_runtime::Message<u8>) {
    NEXT.push(ms(msg.due_at()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_broken_next_costs_at_most_a_command_a_second() {
    let server = RedisServer::start();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["iso.next"])
        .spawn()
        .await
        .unwrap();
    let p = rt.producer();
    p.upsert_schedule(
        "nx",
        Schedule::every(Duration::from_millis(500)).unwrap(),
        "iso.next",
        &1u8,
    )
    .await
    .unwrap();
    NEXT.wait_for(2, Duration::from_secs(10)).await;
    hset(&server, "delayq:{iso.next}:schedule:nx", "next", "soon");
    // The runtime meets it at its next write (within half a second), then backs off.
    sleep_ms(1_000).await;
    // Not across the minute's history writes (the ticks' topic counted something).
    delayq_dev::clear_of_history_writes(Duration::from_secs(3)).await;
    server.reset_stats();
    sleep_ms(3_000).await;
    let calls = server.command_calls();
    // An idle runtime issues next to nothing; the broken record at most one read a second.
    assert!(
        total(&calls) <= 8,
        "{} commands in 3 s: {calls:?}",
        total(&calls)
    );
    let health = rt.health().await;
    assert_eq!(health.failing_schedules.len(), 1, "{health:?}");
    assert!(
        health.failing_schedules[0].error.contains("soon"),
        "{health:?}"
    );
    rt.shutdown().await.unwrap();
}

static FAST: Seen<u64> = Seen::new();

#[delay_listener(topic = "iso.fast")]
async fn fast_job(msg: delayq_runtime::Message<u8>) {
    FAST.push(ms(msg.due_at()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_reads_only_what_changed_while_ticks_go_on() {
    const IDLE: usize = 2_000;
    let server = RedisServer::start();
    let p = producer(&server).await;
    let hourly = Schedule::every(Duration::from_secs(3_600)).unwrap();
    for i in 0..IDLE {
        p.upsert_schedule(&format!("idle-{i:05}"), hourly.clone(), "iso.fast", &0u8)
            .await
            .unwrap();
    }
    p.upsert_schedule(
        "pulse",
        Schedule::every(Duration::from_millis(250)).unwrap(),
        "iso.fast",
        &1u8,
    )
    .await
    .unwrap();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["iso.fast"])
        .spawn()
        .await
        .unwrap();
    FAST.wait_for(2, Duration::from_secs(10)).await;
    server.reset_stats();
    let from = now_ms();
    for round in 0..8u64 {
        // From this process and from "another" (the change log is read either way).
        p.upsert_schedule(
            "changing",
            Schedule::every(Duration::from_millis(3_600_000 + round * 1_000)).unwrap(),
            "iso.fast",
            &0u8,
        )
        .await
        .unwrap();
        sleep_ms(250).await;
    }
    sleep_ms(500).await;
    let to = now_ms();
    let calls = server.command_calls();
    let reads = calls.get("hgetall").copied().unwrap_or(0);
    // Each change reads the changed record (and the producer's own stale re-reads): never the
    // 2,000 idle ones.
    assert!(reads <= 40, "{reads} records read for 8 changes: {calls:?}");
    // The pulse kept its grid meanwhile.
    let due: Vec<u64> = FAST
        .all()
        .into_iter()
        .filter(|d| *d >= from + 250 && *d + 500 <= to)
        .collect();
    let expected = (to - 500 - (from + 250)) / 250;
    assert!(
        due.len() as u64 + 1 >= expected,
        "{} of {expected} ticks: {due:?}",
        due.len()
    );
    rt.shutdown().await.unwrap();
}
