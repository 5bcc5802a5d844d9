// rate_per_key with the test kit and the configuration: `advance(d)` lets `d` pass for the
// keys' limits too (what it made due starts at once; a message its key held back comes due
// with the rest), and `rate_per_key` set from outside the code replaces the attribute's (the
// stats show the rate in use).

use std::time::Duration;

use delayq_core::SendOptions;
use delayq_dev::{RedisServer, Seen};
use delayq_runtime::testing::TestRuntime;
use delayq_runtime::{delay_listener, Runtime};

static KIT: Seen<String> = Seen::new();

#[delay_listener(topic = "flow.perkey.kit", rate_per_key = "1/m")]
async fn per_key_kit(tag: String) {
    KIT.push(tag);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_advance_lets_a_keys_held_back_and_future_messages_run() {
    let t = TestRuntime::builder()
        .topics(["flow.perkey.kit"])
        .start()
        .await
        .unwrap();
    let topic = "flow.perkey.kit";
    let p = t.producer();
    // Two due now for key a: one runs, the other waits a minute for its key.
    for tag in ["a1", "a2"] {
        let opts = SendOptions::new().key("a");
        p.send_with(topic, &tag.to_string(), opts).await.unwrap();
    }
    KIT.wait_for(1, Duration::from_secs(5)).await;
    // Three due in ten minutes for key b.
    for tag in ["b1", "b2", "b3"] {
        let opts = SendOptions::new().key("b").delay(Duration::from_secs(600));
        p.send_with(topic, &tag.to_string(), opts).await.unwrap();
    }
    t.advance(Duration::from_secs(601)).await.unwrap();
    let idle = t.run_until_idle_within(Duration::from_secs(5)).await;
    let mut ran = KIT.all();
    ran.sort();
    t.shutdown().await.unwrap();
    assert!(idle.is_ok(), "{idle:?}");
    assert_eq!(ran, ["a1", "a2", "b1", "b2", "b3"]);
}

#[delay_listener(topic = "flow.perkey.config", rate_per_key = "5/s")]
async fn per_key_config(_n: u32) {}

#[tokio::test]
async fn rate_per_key_set_outside_the_code_is_the_one_in_use() {
    let server = RedisServer::start();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["flow.perkey.config"])
        .set("listeners.\"flow.perkey.config\".rate_per_key", "2/m")
        .spawn()
        .await
        .unwrap();
    let shown = format!("{:?}", rt.config());
    assert!(shown.contains("2/m"), "{shown}");
    let p = delayq_dev::producer(&server).await;
    let stats = p.topic_stats("flow.perkey.config").await.unwrap();
    assert_eq!(stats.rate.as_deref(), Some("2/m per key"));
    rt.shutdown().await.unwrap();
}
