// Review: the test kit and the rate limit. API.md: "advance(d) lets d pass for everything
// waiting". travel.lua moves due times but not the topic's `rate_tat` (which claim_due
// compares with Redis' real clock), so a message held back by `rate` stays held after an
// advance of an hour, and `run_until_idle` times out.

use std::time::Duration;

use delayq_dev::Seen;
use delayq_runtime::delay_listener;
use delayq_runtime::testing::TestRuntime;

static RAN: Seen<u32> = Seen::new();

#[delay_listener(topic = "review.kit.rate", rate = "1/m")]
async fn limited(n: u32) {
    RAN.push(n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_advance_of_an_hour_lets_a_1_per_minute_topic_run_its_three_messages() {
    let t = TestRuntime::builder()
        .topics(["review.kit.rate"])
        .start()
        .await
        .unwrap();
    for n in 0..3u32 {
        t.producer()
            .send("review.kit.rate", &n, Duration::ZERO)
            .await
            .unwrap();
    }
    RAN.wait_for(1, Duration::from_secs(5)).await;
    t.advance(Duration::from_secs(3600)).await.unwrap();
    let idle = t.run_until_idle_within(Duration::from_secs(5)).await;
    let ran = RAN.all();
    assert!(
        idle.is_ok() && ran.len() == 3,
        "after advance(1h): run_until_idle {idle:?}; ran {ran:?}"
    );
    // The credit was for what that advance made due: an advance with nothing waiting gives
    // none, and messages sent after it start at the limit's pace (one now, the burst).
    t.advance(Duration::from_secs(3600)).await.unwrap();
    for n in 3..6u32 {
        t.producer()
            .send("review.kit.rate", &n, Duration::ZERO)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ran = RAN.all();
    t.shutdown().await.unwrap();
    assert_eq!(ran.len(), 4, "credit left over from an empty advance: {ran:?}");
}
