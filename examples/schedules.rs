//! Schedules: a daily report at 09:00 Berlin time and a sweep every 5 minutes, both
//! `#[scheduled]` fns, and a dynamic schedule made from code that sends a heartbeat to an
//! ordinary listener every second. It prints when each will run next, lets the heartbeat
//! tick three times, and exits (status 1 when the heartbeats did not come on time).
//!
//!     cargo run --example schedules
//!
//! Uses DELAYQ_REDIS_URL when set, else the Redis on 127.0.0.1:6379 when one answers, else it
//! starts a throwaway redis-server of its own.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use delayq_runtime::{delay_listener, scheduled, Message, Runtime, Schedule, Tick};
use serde::{Deserialize, Serialize};

// Every day at 09:00 in Berlin (08:00 UTC in winter, 07:00 in summer), once across all
// processes of the namespace; a day missed while nothing ran is caught up once.
#[scheduled(name = "daily-report", cron = "0 9 * * *", tz = "Europe/Berlin")]
async fn daily_report(tick: Tick) -> Result<(), String> {
    println!("daily report for {:?}", tick.scheduled_at());
    Ok(())
}

// Every 5 minutes; ticks missed while nothing ran are skipped.
#[scheduled(name = "sweep", every = "5m", catch_up = "none")]
async fn sweep(tick: Tick) {
    println!("sweeping ({} ticks skipped before this one)", tick.missed());
}

#[derive(Debug, Serialize, Deserialize)]
struct Heartbeat {
    service: String,
}

static BEATS: AtomicUsize = AtomicUsize::new(0);
static LATEST_MS: AtomicU64 = AtomicU64::new(0);

// An ordinary listener: the dynamic schedule below sends its payload here at every tick.
#[delay_listener(topic = "example.heartbeat")]
async fn heartbeat(msg: Message<Heartbeat>) {
    let late = SystemTime::now()
        .duration_since(msg.due_at())
        .unwrap_or_default();
    LATEST_MS.fetch_max(late.as_millis() as u64, Ordering::SeqCst);
    let n = BEATS.fetch_add(1, Ordering::SeqCst) + 1;
    println!(
        "heartbeat {n} from {}: due {}, handled {} ms after",
        msg.payload().service,
        clock(msg.due_at()),
        late.as_millis()
    );
}

/// A time as it reads in zone `tz`, for the printout.
fn local(t: SystemTime, tz: &str) -> String {
    let zoned = jiff::Timestamp::try_from(t)
        .ok()
        .and_then(|ts| Some(ts.to_zoned(jiff::tz::TimeZone::get(tz).ok()?)));
    zoned.map_or("-".into(), |z| {
        z.strftime("%Y-%m-%d %H:%M:%S%.3f %Z").to_string()
    })
}

fn clock(t: SystemTime) -> String {
    local(t, "UTC")
}

#[tokio::main]
async fn main() -> Result<(), delayq_runtime::Error> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let (url, _own_server) = delayq_examples::redis_for_examples();
    let namespace = format!("schedules-{}", std::process::id());
    println!(
        "Redis: {}  namespace: {namespace}",
        delayq_examples::redact_url(&url)
    );

    // The runtime writes the #[scheduled] fns' schedules at start.
    let runtime = Runtime::builder()
        .redis_url(&url)
        .namespace(&namespace)
        .spawn()
        .await?;
    let producer = runtime.producer();
    let every_second = Schedule::every(Duration::from_secs(1))?;
    producer
        .upsert_schedule(
            "heartbeat",
            every_second,
            "example.heartbeat",
            &Heartbeat {
                service: "example".into(),
            },
        )
        .await?;

    let now = SystemTime::now();
    let daily = Schedule::cron("0 9 * * *")?.tz("Europe/Berlin")?;
    let next: Vec<String> = daily
        .next_ticks(now, 3)?
        .into_iter()
        .map(|t| local(t, "Europe/Berlin"))
        .collect();
    println!("daily-report runs next at {}", next.join(", "));
    for s in producer.schedules().await? {
        println!(
            "schedule {:<13} {:<10} tz {:<14} next tick {}  (topic {})",
            s.name,
            s.spec,
            s.tz,
            s.next_at.map_or("-".into(), |t| local(t, &s.tz)),
            s.topic
        );
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while BEATS.load(Ordering::SeqCst) < 3 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // An example leaves nothing recurring behind (a #[scheduled] fn's schedule is written again
    // whenever a runtime that has it starts).
    for name in ["heartbeat", "daily-report", "sweep"] {
        producer.remove_schedule(name).await?;
    }
    runtime.shutdown().await?;
    let (beats, latest) = (
        BEATS.load(Ordering::SeqCst),
        LATEST_MS.load(Ordering::SeqCst),
    );
    if beats < 3 || latest > 1_000 {
        eprintln!("NOT ON TIME: {beats} of 3 heartbeats within 10 s, the latest {latest} ms after its due time");
        std::process::exit(1);
    }
    println!("3 heartbeats on time (the latest {latest} ms after its due time); bye");
    Ok(())
}
