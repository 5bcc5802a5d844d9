//! Start-up errors a newcomer can run into.

use delayq_dev::RedisServer;
use delayq_runtime::{delay_listener, Error, Runtime};

#[delay_listener(topic = "known")]
async fn known(_: u32) {}

#[tokio::test]
async fn selecting_a_topic_without_a_listener_is_an_error() {
    let server = RedisServer::start();
    let err = Runtime::builder()
        .redis_url(server.url())
        .topics(["unknown"])
        .spawn()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no #[delay_listener] handles topic \"unknown\""),
        "{err}"
    );
}

#[tokio::test]
async fn an_unreachable_redis_fails_at_start_with_a_hint() {
    let server = RedisServer::start();
    let url = server.url();
    drop(server);
    let err = Runtime::builder()
        .redis_url(&url)
        .spawn()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    assert!(err.to_string().contains("DELAYQ_REDIS_URL"), "{err}");
}

#[tokio::test]
async fn a_bad_namespace_is_refused() {
    let server = RedisServer::start();
    let err = Runtime::builder()
        .redis_url(server.url())
        .namespace("has space")
        .spawn()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidNamespace { .. }), "{err}");
}
