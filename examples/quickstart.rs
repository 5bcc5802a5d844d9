//! Quickstart: send three messages due in 1, 2 and 3 seconds; a listener prints each as it
//! arrives, on time; then the program shuts down and exits.
//!
//!     cargo run --example quickstart
//!
//! Uses DELAYQ_REDIS_URL when set, else the Redis on 127.0.0.1:6379 when one answers, else it
//! starts a throwaway redis-server of its own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use delayq_runtime::{delay_listener, Message, Producer, Runtime};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Reminder {
    text: String,
}

static ARRIVED: AtomicUsize = AtomicUsize::new(0);

#[delay_listener(topic = "quickstart.reminders")]
async fn on_reminder(msg: Message<Reminder>) {
    let late = SystemTime::now()
        .duration_since(msg.due_at())
        .unwrap_or_default();
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
    let (url, _own_server) = delayq_dev::redis_for_examples();
    // A namespace of its own, so the example never meets other data in that Redis.
    let namespace = format!("quickstart-{}", std::process::id());
    println!(
        "Redis: {}  namespace: {namespace}",
        delayq_runtime::redact_url(&url)
    );

    let runtime = Runtime::builder()
        .redis_url(&url)
        .namespace(&namespace)
        .spawn()
        .await?;
    let producer = Producer::connect(&url).await?.with_namespace(&namespace)?;
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
    if arrived < 3 {
        eprintln!("only {arrived} of 3 reminders arrived within 15 s");
        std::process::exit(1);
    }
    println!("all 3 reminders arrived on time; bye");
    Ok(())
}
