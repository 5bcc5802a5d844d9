//! Quickstart: send three messages due in 1, 2 and 3 seconds; a listener prints each as it
//! arrives and how late it was; the program checks that none came early or more than a second
//! late, shuts down and exits (status 1 when a reminder was missing, early or late).
//!
//!     cargo run --example quickstart
//!
//! Uses DELAYQ_REDIS_URL when set, else the Redis on 127.0.0.1:6379 when one answers, else it
//! starts a throwaway redis-server of its own.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use delayq_runtime::{delay_listener, Message, Producer, Runtime};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Reminder {
    text: String,
}

static ARRIVED: AtomicUsize = AtomicUsize::new(0);
static EARLY: AtomicUsize = AtomicUsize::new(0);
static LATEST_MS: AtomicU64 = AtomicU64::new(0);
/// Later than this after its due time counts as not on time.
const ON_TIME: Duration = Duration::from_secs(1);

#[delay_listener(topic = "quickstart.reminders")]
async fn on_reminder(msg: Message<Reminder>) {
    // Due times come from the Redis server's clock; this compares them with this machine's,
    // which is the same clock when Redis runs here.
    let late = match SystemTime::now().duration_since(msg.due_at()) {
        Ok(late) => late,
        Err(early) => {
            println!("EARLY:   {} by {:?}", msg.payload().text, early.duration());
            EARLY.fetch_add(1, Ordering::SeqCst);
            Duration::ZERO
        }
    };
    LATEST_MS.fetch_max(late.as_millis() as u64, Ordering::SeqCst);
    let delay = msg
        .due_at()
        .duration_since(msg.enqueued_at())
        .unwrap_or_default();
    println!(
        "arrived: {:<24} sent with a {:.1} s delay, handled {} ms after its due time",
        msg.payload().text,
        delay.as_secs_f64(),
        late.as_millis()
    );
    ARRIVED.fetch_add(1, Ordering::SeqCst);
}

#[tokio::main]
async fn main() -> Result<(), delayq_runtime::Error> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let (url, _own_server) = delayq_examples::redis_for_examples();
    // A namespace of its own, so the example never meets other data in that Redis.
    let namespace = format!("quickstart-{}", std::process::id());
    println!(
        "Redis: {}  namespace: {namespace}",
        delayq_examples::redact_url(&url)
    );

    let runtime = Runtime::builder()
        .redis_url(&url)
        .namespace(&namespace)
        .spawn()
        .await?;
    // The runtime's own producer: same Redis, same namespace.
    let producer: Producer = runtime.producer();
    for (secs, text) in [
        (3, "stretch your legs"),
        (1, "drink some water"),
        (2, "check the oven"),
    ] {
        let text = text.to_string();
        let id = producer
            .send(
                "quickstart.reminders",
                &Reminder { text: text.clone() },
                Duration::from_secs(secs),
            )
            .await?;
        println!("sent:    {text:<24} due in {secs} s (id {id})");
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while ARRIVED.load(Ordering::SeqCst) < 3 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    runtime.shutdown().await?;
    let arrived = ARRIVED.load(Ordering::SeqCst);
    let (early, latest) = (
        EARLY.load(Ordering::SeqCst),
        LATEST_MS.load(Ordering::SeqCst),
    );
    if arrived < 3 || early > 0 || latest > ON_TIME.as_millis() as u64 {
        eprintln!(
            "NOT ON TIME: {arrived} of 3 reminders arrived within 15 s, {early} early, the latest {latest} ms after its due time (allowed: {} ms)",
            ON_TIME.as_millis()
        );
        std::process::exit(1);
    }
    println!("all 3 reminders arrived on time (none early, the latest {latest} ms after its due time); bye");
    Ok(())
}
