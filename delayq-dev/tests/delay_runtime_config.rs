//! Start-up errors a newcomer can run into.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use delayq_dev::RedisServer;
use delayq_runtime::{delay_listener, Error, Producer, Runtime};

static KNOWN: AtomicUsize = AtomicUsize::new(0);

#[delay_listener(topic = "known")]
async fn known(_: u32) {
    KNOWN.fetch_add(1, Ordering::SeqCst);
}

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
    // The URL came from the builder: the error says so, and does not send the user to an
    // environment variable they never set.
    let text = err.to_string();
    assert!(
        text.contains(&url)
            && text.contains("Runtime::builder().redis_url")
            && !text.contains("DELAYQ_REDIS_URL"),
        "{text}"
    );
}

#[test]
fn an_unreachable_redis_from_the_environment_names_the_variable() {
    let server = RedisServer::start();
    let url = server.url();
    drop(server);
    // A real process configured only by its environment, as `start()` is.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_delayq-test-consumer"))
        .env("DELAYQ_REDIS_URL", &url)
        .env("RUST_LOG", "off")
        .output()
        .expect("run the test consumer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&url) && stderr.contains("from DELAYQ_REDIS_URL"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_runtimes_producer_sends_where_the_runtime_listens() {
    let server = RedisServer::start();
    let handle = Runtime::builder()
        .redis_url(server.url())
        .namespace("elsewhere")
        .topics(["known"])
        .spawn()
        .await
        .unwrap();
    let producer: Producer = handle.producer();
    assert_eq!(producer.namespace(), "elsewhere");
    let before = KNOWN.load(Ordering::SeqCst);
    producer.send("known", &1u32, Duration::ZERO).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while KNOWN.load(Ordering::SeqCst) == before {
        assert!(std::time::Instant::now() < deadline, "never delivered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // It went to the runtime's namespace, not the default one.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("delayq:*")
        .query(&mut server.connection())
        .unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    handle.shutdown().await.unwrap();
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
