//! "advance ... promotes every far bucket however far" (issue 32 item 9: terminate
//! for any allowed due time). With a schedule in the test, an advance that far writes every
//! tick within it first, 1,000 a call, up to 10,000 calls (10 million messages) and then
//! silently stops writing: an advance of a century over an hourly schedule (876,600 ticks)
//! does not return within a minute.

use std::time::{Duration, Instant};

use delayq_runtime::testing::TestRuntime;
use delayq_runtime::{scheduled, Tick};

#[scheduled(name = "kit.review.hourly", every = "1h")]
async fn hourly(_tick: Tick) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advancing_a_century_over_an_hourly_schedule_returns() {
    let t = TestRuntime::builder()
        .schedules(["kit.review.hourly"])
        .start()
        .await
        .unwrap();
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(60),
        t.advance(Duration::from_secs(100 * 365 * 86_400)),
    )
    .await;
    let took = started.elapsed();
    let pending = t.pending("kit.review.hourly").await.map(|p| p.len());
    println!(
        "advance(100 years): {:?} after {took:?}; pending listed: {pending:?}",
        r.as_ref().map(|_| ())
    );
    assert!(r.is_ok(), "advance(100 years) did not return within 60 s");
}
