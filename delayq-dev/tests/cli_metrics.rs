//! The runtime's metrics under load (10,000 messages with retries and dead letters), read the
//! way Prometheus reads them (its endpoint, switched on with `.prometheus(addr)`), against a
//! ledger of every handler run. One test per binary: the recorder is process-wide.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use delayq_dev::{
    drained, free_port, producer, scrape_metrics, stream_dead_letters, wait_until, RedisServer,
};
use delayq_runtime::{delay_listener, scheduled, stream_listener, Message, Runtime, Tick};

static RUNS_OK: AtomicU64 = AtomicU64::new(0);
static RUNS_FAILED: AtomicU64 = AtomicU64::new(0);

/// Every 10th message fails its first run; every 50th fails every run (and dies on its third).
#[delay_listener(
    topic = "metrics.load",
    concurrency = 32,
    max_attempts = 3,
    backoff = "fixed(10ms)"
)]
async fn flaky(msg: Message<u64>) -> Result<(), String> {
    let i = *msg.payload();
    if i.is_multiple_of(50) || (i.is_multiple_of(10) && msg.attempt() == 1) {
        RUNS_FAILED.fetch_add(1, Ordering::SeqCst);
        return Err(format!("run {} of {i} failed", msg.attempt()));
    }
    RUNS_OK.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

static TICKS_RAN: AtomicU64 = AtomicU64::new(0);

#[scheduled(name = "metrics.tick", every = "100ms")]
async fn tick(_tick: Tick) {
    TICKS_RAN.fetch_add(1, Ordering::SeqCst);
}

static STREAM_OK: AtomicU64 = AtomicU64::new(0);
static STREAM_FAILED: AtomicU64 = AtomicU64::new(0);

/// Every 100th entry fails both its deliveries and goes to the dead-letter stream.
#[stream_listener(
    stream = "metrics.events",
    group = "g",
    max_deliveries = 2,
    min_idle = "200ms",
    backoff = "fixed(10ms)"
)]
async fn events(i: u64) -> Result<(), String> {
    if i.is_multiple_of(100) {
        STREAM_FAILED.fetch_add(1, Ordering::SeqCst);
        return Err(format!("entry {i} failed"));
    }
    STREAM_OK.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// The value of the sample of `metric` whose labels include every one of `labels`.
fn sample(scrape: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let (name_labels, value) = line.rsplit_once(' ')?;
        let (name, rest) = name_labels.split_once('{').unwrap_or((name_labels, ""));
        (name == metric && labels.iter().all(|l| rest.contains(l)))
            .then(|| value.parse().ok())
            .flatten()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_metrics_match_the_ledger_under_load() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let runtime = Runtime::builder()
        .redis_url(server.url())
        .topics(["metrics.load"])
        .streams(["metrics.events"])
        .schedules(["metrics.tick"])
        .prometheus(addr)
        .gauges_every(Duration::from_secs(1))
        .spawn()
        .await
        .unwrap();
    let n = 10_000u64;
    p.send_batch("metrics.load", (0..n).map(|i| (i, Duration::ZERO)))
        .await
        .unwrap();
    let entries = 2_000u64;
    for i in 0..entries {
        p.publish("metrics.events", &i).await.unwrap();
    }
    let counts = drained(&p, "metrics.load", Duration::from_secs(120)).await;
    let stream_dead =
        stream_dead_letters(&p, "metrics.events", "g", 20, Duration::from_secs(60)).await;
    assert_eq!(stream_dead.len(), 20);
    assert_eq!(counts.dead, (n / 50) as usize, "{counts:?}");

    let topic = "topic=\"metrics.load\"";
    let (ok, failed) = (
        RUNS_OK.load(Ordering::SeqCst),
        RUNS_FAILED.load(Ordering::SeqCst),
    );
    let read = |s: &str, metric: &str, labels: &[&str]| sample(s, metric, labels).unwrap_or(-1.0);
    // The last settles are recorded just after Redis has them; give the counters a moment.
    let mut last = String::new();
    wait_until(
        Duration::from_secs(10),
        "metrics to match the ledger",
        || {
            last = scrape_metrics(addr);
            read(&last, "delayq_handled_total", &[topic, "outcome=\"ok\""]) == ok as f64
                && read(&last, "delayq_handled_total", &[topic, "outcome=\"dead\""])
                    == counts.dead as f64
                && read(&last, "delayq_dead", &[topic]) == counts.dead as f64
        },
    )
    .await;
    let handled = |outcome: &str| {
        read(
            &last,
            "delayq_handled_total",
            &[topic, &format!("outcome=\"{outcome}\"")],
        )
    };
    let ours: Vec<&str> = last
        .lines()
        .filter(|l| l.contains("metrics.load"))
        .collect();
    println!("the scrape, delayq's samples:\n{}", ours.join("\n"));
    println!(
        "ledger: {ok} ok runs, {failed} failed runs; metrics: ok {}, retry {}, dead {}",
        handled("ok"),
        handled("retry"),
        handled("dead")
    );
    assert_eq!(handled("ok"), ok as f64, "{last}");
    assert_eq!(handled("retry") + handled("dead"), failed as f64, "{last}");
    assert_eq!(handled("dead"), counts.dead as f64, "{last}");
    assert_eq!(
        ok,
        n - n / 50,
        "every message but the poisoned ones succeeded once"
    );
    // One lateness sample per handler run; nothing running or pending once drained.
    assert_eq!(
        read(&last, "delayq_lateness_seconds_count", &[topic]),
        (ok + failed) as f64,
        "{last}"
    );
    assert_eq!(read(&last, "delayq_inflight", &[topic]), 0.0, "{last}");
    assert_eq!(read(&last, "delayq_pending", &[topic]), 0.0, "{last}");
    assert!(
        last.contains("delayq_lateness_seconds_bucket{"),
        "a histogram, not a summary: {last}"
    );

    // The same for the stream listener, under its stream and group labels.
    let labels = ["stream=\"metrics.events\"", "group=\"g\""];
    let (ok, failed) = (
        STREAM_OK.load(Ordering::SeqCst),
        STREAM_FAILED.load(Ordering::SeqCst),
    );
    wait_until(
        Duration::from_secs(10),
        "stream metrics to match the ledger",
        || {
            last = scrape_metrics(addr);
            read(
                &last,
                "delayq_handled_total",
                &[labels[0], labels[1], "outcome=\"ok\""],
            ) == ok as f64
        },
    )
    .await;
    let handled = |outcome: &str| {
        read(
            &last,
            "delayq_handled_total",
            &[labels[0], labels[1], &format!("outcome=\"{outcome}\"")],
        )
    };
    println!(
        "stream ledger: {ok} ok runs, {failed} failed runs; metrics: ok {}, retry {}, dead {}",
        handled("ok"),
        handled("retry"),
        handled("dead")
    );
    assert_eq!(ok, entries - 20);
    assert_eq!(handled("retry") + handled("dead"), failed as f64, "{last}");
    assert_eq!(handled("dead"), 20.0, "{last}");
    assert_eq!(
        read(&last, "delayq_lateness_seconds_count", &labels),
        (ok + failed) as f64,
        "{last}"
    );

    // The schedule: ticks written (at most a second's worth ahead of those run), their lag,
    // and the ticks' own handler outcomes under the schedule's topic.
    let last = scrape_metrics(addr);
    let ran = TICKS_RAN.load(Ordering::SeqCst) as f64;
    let sched = "schedule=\"metrics.tick\"";
    let produced = read(
        &last,
        "delayq_schedule_ticks_total",
        &[sched, "outcome=\"produced\""],
    );
    println!("schedule: {ran} ticks ran, {produced} written");
    assert!(ran >= 10.0, "{ran} ticks ran");
    assert!(produced >= ran && produced <= ran + 12.0, "{last}");
    assert!(
        read(&last, "delayq_schedule_lag_seconds", &[sched]) >= 0.0,
        "{last}"
    );
    assert!(
        read(
            &last,
            "delayq_handled_total",
            &["topic=\"metrics.tick\"", "outcome=\"ok\""]
        ) >= ran - 1.0,
        "{last}"
    );

    // The alert rules and the Grafana dashboard in docs/alerts name only metrics that exist:
    // each is in this scrape, but `delayq_schedule_stalled`, which has a series only once a
    // schedule stalled (schedule_stalled_metric.rs scrapes it); and each is one the runtime's
    // code exports.
    let runtime_src = runtime_source();
    for file in ["delayq.rules.yml", "grafana-dashboard.json"] {
        let path = format!("{}/../docs/alerts/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let named = metric_names(&text);
        assert!(named.len() >= 8, "{file} names {named:?}");
        for name in named {
            let base = name.strip_suffix("_bucket").unwrap_or(&name);
            assert!(
                runtime_src.contains(&format!("\"{base}\"")),
                "{file} names {name}, which delayq-runtime never exports"
            );
            if name == "delayq_schedule_stalled" {
                continue;
            }
            assert!(
                last.lines()
                    .any(|l| l.starts_with(&format!("{name}{{"))
                        || l.starts_with(&format!("{name} "))),
                "{file} names {name}, which the runtime does not export:\n{last}"
            );
        }
    }
    runtime.shutdown().await.unwrap();
}

/// The text of delayq-runtime's sources.
fn runtime_source() -> String {
    fn walk(dir: &std::path::Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = String::new();
    let src = format!("{}/../delayq-runtime/src", env!("CARGO_MANIFEST_DIR"));
    walk(std::path::Path::new(&src), &mut out);
    out
}

/// The metric names (`delayq_…`) a text mentions.
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("delayq_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}
