//! The series the alerting rules (docs/alerts/delayq.rules.yml) take `increase()` of are
//! exported at 0 before their first event, so the first event is an increase; and a late
//! write's `delayq_schedule_lag_seconds` goes back to 0 within a minute instead of holding
//! until the schedule's next write. One test per binary: the recorder is process-wide.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use delayq_dev::{
    free_port, producer, redis_ms, scrape_metrics, sleep_ms, wait_until, RedisServer,
};
use delayq_runtime::{delay_listener, Runtime, Schedule};

#[delay_listener(topic = "alerts.topic")]
async fn plain(_msg: u8) {}

#[delay_listener(topic = "alerts.ticks")]
async fn ticks(_msg: u8) {}

/// The value of the series `name{labels}` (labels in any order), if exported.
fn value(scrape: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (set, v) = rest.split_once("} ")?;
        let mut got: Vec<&str> = set.split(',').collect();
        let mut want: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        got.sort();
        want.sort();
        (got == want).then(|| v.trim().parse().ok())?
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerting_series_start_at_zero_and_a_late_writes_lag_does_not_linger() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let hourly = Schedule::every(Duration::from_secs(3600)).unwrap();
    p.upsert_schedule("late", hourly, "alerts.ticks", &1u8)
        .await
        .unwrap();
    // Its next tick 5 s ago (within misfire_after: written, late, not skipped).
    let _: () = redis::cmd("HSET")
        .arg("delayq:{alerts.ticks}:schedule:late")
        .arg("next")
        .arg(redis_ms(&server) - 5_000)
        .query(&mut server.connection())
        .unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["alerts.topic", "alerts.ticks"])
        .prometheus(addr)
        .spawn()
        .await
        .unwrap();
    let written = Instant::now();
    let first = scrape_metrics(addr);
    let schedule = |outcome| [("schedule", "late"), ("outcome", outcome)];
    let ticks_total = "delayq_schedule_ticks_total";
    assert_eq!(
        value(&first, ticks_total, &schedule("produced")),
        Some(1.0),
        "{first}"
    );
    assert_eq!(
        value(&first, ticks_total, &schedule("skipped")),
        Some(0.0),
        "no skipped series before the first skip:\n{first}"
    );
    let lag = value(
        &first,
        "delayq_schedule_lag_seconds",
        &[("schedule", "late")],
    );
    assert!(
        lag.is_some_and(|l| l >= 4.0),
        "the late write's lag: {lag:?}"
    );
    let topic = [("topic", "alerts.topic")];
    for (name, labels) in [
        ("delayq_handled_total", &[topic[0], ("outcome", "dead")][..]),
        ("delayq_dead_dropped_total", &topic[..]),
        ("delayq_timeouts_total", &topic[..]),
    ] {
        assert_eq!(
            value(&first, name, labels),
            Some(0.0),
            "{name}{labels:?}:\n{first}"
        );
    }
    // The lag is shown for a minute, then 0 (the next write is an hour away).
    wait_until(Duration::from_secs(75), "the lag back at 0", || {
        value(
            &scrape_metrics(addr),
            "delayq_schedule_lag_seconds",
            &[("schedule", "late")],
        ) == Some(0.0)
    })
    .await;
    let shown = written.elapsed();
    println!("the late write's lag was shown for {shown:?}");
    assert!(shown >= Duration::from_secs(55), "shown for only {shown:?}");
    sleep_ms(10).await;
    rt.shutdown().await.unwrap();
}
