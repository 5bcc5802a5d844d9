// Review: an operator lowers a listener's rate from the environment/builder (higher
// precedence than the attribute) while the code also set a `burst`: the runtime refuses to
// start, because the code's burst exceeds the new rate's count. The rate alone cannot be
// overridden ("every option here is settable from the attribute, delayq.toml and the
// environment like the others").

use delayq_dev::RedisServer;
use delayq_runtime::{delay_listener, Runtime};

#[delay_listener(topic = "review.override", rate = "100/s", burst = 50)]
async fn h(_n: u32) {}

#[tokio::test]
async fn lowering_the_rate_from_outside_the_code_starts() {
    let server = RedisServer::start();
    let r = Runtime::builder()
        .redis_url(server.url())
        .topics(["review.override"])
        .set("listeners.\"review.override\".rate", "10/s")
        .spawn()
        .await;
    match r {
        Ok(rt) => rt.shutdown().await.unwrap(),
        Err(e) => panic!("rate = 10/s over the attribute's 100/s (burst 50): {e}"),
    }
}
