//! Review r: `advance_with_claims(d)` is documented as "a handler still running renews its
//! lease": only claims whose handler returned without acking (or hangs) come back. But a
//! running handler renews every ack_timeout / 3; the advance moves its deadline into the past
//! at once, the back pool (woken by the script) takes the claim back, and the same message
//! runs a second time while the first run is still going. In production the renewals would
//! have kept the lease the whole time: the test sees a duplicate the deployment never has.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use delayq_runtime::delay_listener;
use delayq_runtime::testing::TestRuntime;

static STARTS: AtomicU32 = AtomicU32::new(0);
static RUNNING: AtomicU32 = AtomicU32::new(0);
static OVERLAP: AtomicU32 = AtomicU32::new(0);

#[delay_listener(topic = "kit.review.busy", ack_timeout = "30s", concurrency = 4)]
async fn busy(_msg: u32) {
    STARTS.fetch_add(1, Ordering::SeqCst);
    if RUNNING.fetch_add(1, Ordering::SeqCst) > 0 {
        OVERLAP.fetch_add(1, Ordering::SeqCst);
    }
    // Working, well within its 30 s ack timeout (it renews every 10 s).
    tokio::time::sleep(Duration::from_secs(2)).await;
    RUNNING.fetch_sub(1, Ordering::SeqCst);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advancing_claims_does_not_rerun_a_handler_that_is_still_running() {
    let t = TestRuntime::builder()
        .topics(["kit.review.busy"])
        .start()
        .await
        .unwrap();
    t.producer()
        .send("kit.review.busy", &1u32, Duration::ZERO)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while STARTS.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // An hour passes for everything, claims included, while the handler works.
    t.advance_with_claims(Duration::from_secs(3_600))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (starts, overlap) = (
        STARTS.load(Ordering::SeqCst),
        OVERLAP.load(Ordering::SeqCst),
    );
    t.run_until_idle().await.unwrap();
    assert_eq!(
        (starts, overlap),
        (1, 0),
        "the message started {starts} times, {overlap} of them while the first run was still running"
    );
    t.shutdown().await.unwrap();
}
