//! Listener behaviour end to end: auto and manual ack, redelivery, retries, dead letters,
//! panics, undecodable payloads and lease renewal.

use std::time::{Duration, SystemTime};

use delayq_dev::RedisServer;
use delayq_dev::{drained, init_tracing, producer, runtime, sleep_ms, Seen};
use delayq_runtime::{delay_listener, Ack, Message};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    n: u32,
}

const WAIT: Duration = Duration::from_secs(20);

// --- auto ack ---------------------------------------------------------------------------

static AUTO: Seen<(u32, u32, bool)> = Seen::new();

#[delay_listener(topic = "auto")]
async fn auto_handler(msg: Message<Job>) {
    let on_time = SystemTime::now() >= msg.due_at();
    AUTO.push((msg.payload().n, msg.attempt(), on_time));
}

#[tokio::test]
async fn auto_ack_handles_each_message_once_when_due() {
    init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["auto"]).await;
    for n in 0..5 {
        p.send(
            "auto",
            &Job { n },
            Duration::from_millis(200 + 100 * n as u64),
        )
        .await
        .unwrap();
    }
    let seen = AUTO.wait_for(5, WAIT).await;
    let counts = drained(&p, "auto", WAIT).await;
    assert_eq!(counts.dead, 0);
    let mut ns: Vec<u32> = seen.iter().map(|e| e.0).collect();
    ns.sort();
    assert_eq!(ns, [0, 1, 2, 3, 4]);
    assert!(
        seen.iter().all(|e| e.1 == 1 && e.2),
        "first attempt, never early: {seen:?}"
    );
    rt.shutdown().await.unwrap();
}

// --- manual ack -------------------------------------------------------------------------

static MANUAL: Seen<u32> = Seen::new();

#[delay_listener(topic = "manual", ack_timeout = "1s")]
async fn manual_handler(msg: Job, ack: Ack) {
    ack.ack().await.expect("ack");
    MANUAL.push(msg.n);
    // A second settle from the same delivery is refused.
    assert!(matches!(
        ack.ack().await,
        Err(delayq_runtime::AckError::Stale)
    ));
}

#[tokio::test]
async fn manual_ack_deletes_the_message() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["manual"]).await;
    p.send("manual", &Job { n: 9 }, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(MANUAL.wait_for(1, WAIT).await, [9]);
    drained(&p, "manual", WAIT).await;
    sleep_ms(1500).await;
    assert_eq!(MANUAL.len(), 1, "acked messages are not redelivered");
    rt.shutdown().await.unwrap();
}

static NEVER_ACKED: Seen<u32> = Seen::new();

#[delay_listener(topic = "never-acked", ack_timeout = "1s")]
async fn never_acks(msg: Message<Job>, ack: Ack) {
    NEVER_ACKED.push(msg.attempt());
    if msg.attempt() >= 2 {
        ack.ack().await.expect("ack the redelivery");
    }
    // attempt 1: the Ack is dropped without a call
}

#[tokio::test]
async fn a_manual_handler_that_never_acks_is_redelivered_after_ack_timeout() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["never-acked"]).await;
    let sent = std::time::Instant::now();
    p.send("never-acked", &Job { n: 1 }, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(NEVER_ACKED.wait_for(2, WAIT).await, [1, 2]);
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(1000),
        "redelivered after {waited:?}, before the ack timeout"
    );
    drained(&p, "never-acked", WAIT).await;
    rt.shutdown().await.unwrap();
}

// --- failures ---------------------------------------------------------------------------

static FAILING: Seen<u32> = Seen::new();

#[delay_listener(topic = "failing", max_attempts = 3, backoff = "fixed(50ms)")]
async fn always_fails(msg: Message<Job>) -> Result<(), String> {
    FAILING.push(msg.attempt());
    Err(format!("failure on attempt {}", msg.attempt()))
}

#[tokio::test]
async fn err_retries_with_backoff_then_dead_letters_with_the_last_error() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["failing"]).await;
    let id = p
        .send("failing", &Job { n: 1 }, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(FAILING.wait_for(3, WAIT).await, [1, 2, 3]);
    let counts = drained(&p, "failing", WAIT).await;
    assert_eq!(counts.dead, 1);
    sleep_ms(300).await;
    assert_eq!(FAILING.len(), 3, "no run after max_attempts");
    let dead = p.dead_letters("failing", 0..10).await.unwrap();
    assert_eq!(dead[0].id, id);
    assert_eq!(dead[0].attempts, 3);
    assert_eq!(dead[0].last_error.as_deref(), Some("failure on attempt 3"));
    assert_eq!(dead[0].reason, "failed 3 of max_attempts 3");
    rt.shutdown().await.unwrap();
}

static PANICKY: Seen<(u32, u32)> = Seen::new();

#[delay_listener(topic = "panicky", backoff = "fixed(50ms)")]
async fn panics_on_first_attempt_of_odd(msg: Message<Job>) {
    PANICKY.push((msg.payload().n, msg.attempt()));
    if msg.payload().n % 2 == 1 && msg.attempt() == 1 {
        panic!("odd job {} panics once", msg.payload().n);
    }
}

#[tokio::test]
async fn a_panicking_handler_is_retried_and_others_keep_being_served() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["panicky"]).await;
    for n in 0..10 {
        p.send("panicky", &Job { n }, Duration::ZERO).await.unwrap();
    }
    // 10 first runs + 5 retries of the odd ones
    let seen = PANICKY.wait_for(15, WAIT).await;
    let counts = drained(&p, "panicky", WAIT).await;
    assert_eq!(counts.dead, 0);
    for n in 0..10 {
        let runs: Vec<u32> = seen.iter().filter(|e| e.0 == n).map(|e| e.1).collect();
        let expected: &[u32] = if n % 2 == 1 { &[1, 2] } else { &[1] };
        assert_eq!(runs, expected, "job {n}");
    }
    rt.shutdown().await.unwrap();
}

static DECODED: Seen<u32> = Seen::new();

#[delay_listener(topic = "typed")]
async fn wants_a_job(msg: Job) {
    DECODED.push(msg.n);
}

#[tokio::test]
async fn an_undecodable_payload_is_dead_lettered_at_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["typed"]).await;
    let bad = p.send("typed", &"not a job", Duration::ZERO).await.unwrap();
    p.send("typed", &Job { n: 5 }, Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(DECODED.wait_for(1, WAIT).await, [5]);
    let counts = drained(&p, "typed", WAIT).await;
    assert_eq!(counts.dead, 1);
    let dead = p.dead_letters("typed", 0..10).await.unwrap();
    assert_eq!(dead[0].id, bad);
    assert_eq!(dead[0].attempts, 1, "not retried");
    assert!(
        dead[0].reason.contains("does not decode"),
        "{}",
        dead[0].reason
    );
    assert!(dead[0].reason.contains("Job"), "{}", dead[0].reason);
    assert_eq!(dead[0].payload, br#""not a job""#);
    rt.shutdown().await.unwrap();
}

static SLOW: Seen<u32> = Seen::new();

#[delay_listener(topic = "slow", ack_timeout = "300ms")]
async fn slower_than_its_ack_timeout(msg: Message<Job>) {
    SLOW.push(msg.attempt());
    tokio::time::sleep(Duration::from_millis(1200)).await;
}

#[tokio::test]
async fn a_running_handler_slower_than_ack_timeout_is_not_redelivered() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["slow"]).await;
    p.send("slow", &Job { n: 1 }, Duration::ZERO).await.unwrap();
    SLOW.wait_for(1, WAIT).await;
    drained(&p, "slow", WAIT).await;
    sleep_ms(500).await;
    assert_eq!(
        SLOW.all(),
        [1],
        "the lease was renewed, so no second delivery"
    );
    rt.shutdown().await.unwrap();
}

static EARLY: Seen<u32> = Seen::new();

#[delay_listener(topic = "right-after-spawn")]
async fn early_handler(n: u32) {
    EARLY.push(n);
}

#[tokio::test]
async fn a_message_sent_right_after_spawn_wakes_the_boss() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["right-after-spawn"]).await;
    let sent = std::time::Instant::now();
    p.send("right-after-spawn", &1, Duration::from_millis(300))
        .await
        .unwrap();
    EARLY.wait_for(1, WAIT).await;
    let took = sent.elapsed();
    // The boss sleeps up to 300 s when idle; only a wake-up gets it here this soon.
    assert!(took < Duration::from_secs(10), "handled after {took:?}");
    rt.shutdown().await.unwrap();
}
