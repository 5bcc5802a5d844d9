//! Testing your own listeners with the test kit (`delayq_runtime::testing`, feature
//! `testing`): an order timeout 30 minutes out, a payment retried every 10 minutes until it is
//! dead-lettered, and a daily report at 09:00 Berlin, each checked in a fraction of a second
//! with time travel, on a real Redis (a throwaway `redis-server` from PATH, or
//! `DELAYQ_TEST_REDIS_URL`). In your crate these are `#[tokio::test]`s; here it is a program
//! that runs them and prints how long each took.
//!
//!     cargo run --example testing

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use delayq_runtime::testing::TestRuntime;
use delayq_runtime::{delay_listener, scheduled, Error, Message, Tick};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct OrderTimeout {
    order_id: u64,
}

static CLOSED: AtomicU64 = AtomicU64::new(0);

// The code under test: close an order nobody paid for within 30 minutes.
#[delay_listener(topic = "order.timeout")]
async fn close_order(msg: Message<OrderTimeout>) -> Result<(), String> {
    CLOSED.store(msg.payload().order_id, Ordering::SeqCst);
    Ok(())
}

// A payment that the provider keeps declining: three attempts, 10 minutes apart.
#[delay_listener(topic = "payment.charge", max_attempts = 3, backoff = "fixed(10m)")]
async fn charge(_order_id: u64) -> Result<(), String> {
    Err("card declined".into())
}

static REPORTED_AT: AtomicU64 = AtomicU64::new(0);

#[scheduled(name = "daily-report", cron = "0 9 * * *", tz = "Europe/Berlin")]
async fn daily_report(tick: Tick) {
    let at = tick
        .scheduled_at()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    REPORTED_AT.store(at.as_secs(), Ordering::SeqCst);
}

/// A 30-minute timeout, tested without waiting 30 minutes.
async fn closes_unpaid_orders() -> Result<(), Error> {
    let t = TestRuntime::builder()
        .topics(["order.timeout"])
        .start()
        .await?;
    let timeout = Duration::from_secs(30 * 60);
    t.producer()
        .send("order.timeout", &OrderTimeout { order_id: 7 }, timeout)
        .await?;
    t.advance(timeout - Duration::from_secs(1)).await?;
    t.run_until_idle().await?;
    assert_eq!(CLOSED.load(Ordering::SeqCst), 0, "closed a second early");
    t.advance(Duration::from_secs(1)).await?;
    t.run_until_idle().await?;
    assert_eq!(CLOSED.load(Ordering::SeqCst), 7);
    assert_eq!(t.handled("order.timeout").await?.ok, 1);
    t.shutdown().await
}

/// Retries 10 minutes apart, then the dead letters.
async fn dead_letters_a_declined_payment() -> Result<(), Error> {
    let t = TestRuntime::builder()
        .topics(["payment.charge"])
        .start()
        .await?;
    t.producer()
        .send("payment.charge", &7u64, Duration::ZERO)
        .await?;
    for _ in 0..3 {
        t.run_until_idle().await?;
        t.advance(Duration::from_secs(600)).await?;
    }
    t.run_until_idle().await?;
    let dead = t.dead_letters("payment.charge").await?;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attempts, 3);
    assert_eq!(dead[0].last_error.as_deref(), Some("card declined"));
    let handled = t.handled("payment.charge").await?;
    assert_eq!((handled.ok, handled.retry, handled.dead), (0, 2, 1));
    t.shutdown().await
}

/// Tomorrow's 09:00 report, today.
async fn runs_the_daily_report() -> Result<(), Error> {
    let t = TestRuntime::builder()
        .schedules(["daily-report"])
        .start()
        .await?;
    // A day and an hour: a daylight-saving day is 25 hours long.
    t.advance(Duration::from_secs(25 * 3_600)).await?;
    t.run_until_idle().await?;
    let at = REPORTED_AT.load(Ordering::SeqCst);
    assert!(
        at > 0 && at.is_multiple_of(3_600),
        "the tick's nominal time, on the hour: {at}"
    );
    t.shutdown().await
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    for (name, took) in [
        ("closes an unpaid order after 30 minutes", {
            let started = Instant::now();
            closes_unpaid_orders().await?;
            started.elapsed()
        }),
        (
            "dead-letters a payment declined 3 times, 10 minutes apart",
            {
                let started = Instant::now();
                dead_letters_a_declined_payment().await?;
                started.elapsed()
            },
        ),
        ("runs tomorrow's 09:00 Berlin report", {
            let started = Instant::now();
            runs_the_daily_report().await?;
            started.elapsed()
        }),
    ] {
        println!("ok  {name:<58} in {:>4} ms", took.as_millis());
    }
    Ok(())
}
