//! Manual ack: the listener takes an `Ack` and decides. Here it acks even jobs, asks for a retry
//! of odd ones on their first attempt, and dead-letters job 5; then it lists the dead letters.
//!
//!     cargo run --example manual_ack

use std::time::Duration;

use delayq_runtime::{delay_listener, Ack, Message, Producer, Runtime};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

#[derive(Debug, Serialize, Deserialize)]
struct Job {
    n: u32,
}

static DONE: std::sync::OnceLock<mpsc::UnboundedSender<u32>> = std::sync::OnceLock::new();

#[delay_listener(topic = "example.jobs", ack_timeout = "10s", backoff = "fixed(500ms)")]
async fn work(msg: Message<Job>, ack: Ack) {
    let n = msg.payload().n;
    let result = if n == 5 {
        println!("job {n}: cannot be done, dead-lettering");
        ack.dead_letter("job 5 is not allowed").await
    } else if n % 2 == 1 && msg.attempt() == 1 {
        println!("job {n}: attempt 1 failed, asking for a retry");
        return ack.nack("odd jobs fail once").await.expect("nack");
    } else {
        println!("job {n}: done on attempt {}", msg.attempt());
        ack.ack().await
    };
    result.expect("settle");
    let _ = DONE.get().expect("set in main").send(n);
}

#[tokio::main]
async fn main() -> Result<(), delayq_runtime::Error> {
    let (url, _own_server) = delayq_examples::redis_for_examples();
    let namespace = format!("manual-ack-{}", std::process::id());
    let (tx, mut done) = mpsc::unbounded_channel();
    DONE.set(tx).expect("once");

    let runtime = Runtime::builder()
        .redis_url(&url)
        .namespace(&namespace)
        .spawn()
        .await?;
    // The runtime's own producer: same Redis, same namespace.
    let producer: Producer = runtime.producer();
    let jobs = (1..=6).map(|n| (Job { n }, Duration::from_millis(200)));
    producer.send_batch("example.jobs", jobs).await?;

    for _ in 0..6 {
        tokio::time::timeout(Duration::from_secs(15), done.recv())
            .await
            .expect("all jobs settle within 15 s");
    }
    for dead in producer.dead_letters("example.jobs", 0..10).await? {
        println!(
            "dead letter {}: {} (payload {})",
            dead.id,
            dead.reason,
            String::from_utf8_lossy(&dead.payload)
        );
    }
    producer.purge_dead("example.jobs").await?;
    runtime.shutdown().await
}
