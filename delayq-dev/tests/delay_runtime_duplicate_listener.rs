//! Two listeners on one topic in one binary: start-up refuses, naming both functions.

use delayq_runtime::{delay_listener, Error, Runtime};

#[delay_listener(topic = "dup")]
async fn first_handler(_: u32) {}

mod billing {
    use delayq_runtime::delay_listener;

    #[delay_listener(topic = "dup")]
    async fn second_handler(_: u32) {}
}

#[tokio::test]
async fn start_up_refuses_two_listeners_on_one_topic() {
    // No Redis is needed: the check runs before connecting.
    let err = Runtime::builder()
        .redis_url("redis://127.0.0.1:1")
        .spawn()
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::DuplicateListener { .. }), "{text}");
    assert!(
        text.contains("runtime_duplicate_listener::first_handler"),
        "{text}"
    );
    assert!(
        text.contains("runtime_duplicate_listener::billing::second_handler"),
        "{text}"
    );
    assert!(text.contains("\"dup\""), "{text}");
}
