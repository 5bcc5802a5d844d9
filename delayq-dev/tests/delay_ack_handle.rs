//! The `Ack` handle end to end: `nack`, `dead_letter` and `extend` (which the runtime's lease
//! renewal must never shorten), and the runtime's books of claimed deliveries, which a stale
//! settle must leave.

use std::time::{Duration, Instant};

use delayq_dev::RedisServer;
use delayq_dev::{drained, init_tracing, producer, runtime, sleep_ms, Seen};
use delayq_runtime::{delay_listener, Ack, AckError, Message};

const WAIT: Duration = Duration::from_secs(20);

// --- nack -------------------------------------------------------------------------------

static NACKED: Seen<u32> = Seen::new();

#[delay_listener(topic = "ack.nack", backoff = "fixed(100ms)")]
async fn nack_first(msg: Message<u32>, ack: Ack) {
    NACKED.push(msg.attempt());
    if msg.attempt() == 1 {
        ack.nack("not yet").await.expect("nack");
    } else {
        ack.ack().await.expect("ack");
    }
}

#[tokio::test]
async fn nack_retries_after_the_backoff() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["ack.nack"]).await;
    let sent = Instant::now();
    p.send("ack.nack", &1u32, Duration::ZERO).await.unwrap();
    assert_eq!(NACKED.wait_for(2, WAIT).await, [1, 2]);
    assert!(
        sent.elapsed() >= Duration::from_millis(100),
        "backoff skipped"
    );
    let counts = drained(&p, "ack.nack", WAIT).await;
    assert_eq!(counts.dead, 0);
    rt.shutdown().await.unwrap();
}

// --- dead_letter ------------------------------------------------------------------------

static BURIED: Seen<u32> = Seen::new();

#[delay_listener(topic = "ack.dead")]
async fn bury_it(msg: Message<u32>, ack: Ack) {
    ack.dead_letter("order 7 does not exist")
        .await
        .expect("dead_letter");
    BURIED.push(msg.attempt());
    assert!(matches!(ack.ack().await, Err(AckError::Stale)));
}

#[tokio::test]
async fn dead_letter_moves_the_message_to_the_dead_letters_with_the_reason() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["ack.dead"]).await;
    p.send("ack.dead", &7u32, Duration::ZERO).await.unwrap();
    assert_eq!(BURIED.wait_for(1, WAIT).await, [1]);
    let counts = drained(&p, "ack.dead", WAIT).await;
    assert_eq!(counts.dead, 1);
    let dead = p.dead_letters("ack.dead", 0..10).await.unwrap();
    assert_eq!(dead[0].reason, "order 7 does not exist");
    assert_eq!(dead[0].attempts, 1);
    assert_eq!(dead[0].payload_as::<u32>().unwrap(), 7);
    sleep_ms(300).await;
    assert_eq!(BURIED.len(), 1, "a dead letter is not delivered again");
    rt.shutdown().await.unwrap();
}

// --- extend -----------------------------------------------------------------------------

static EXTENDED_RUNS: Seen<u32> = Seen::new();
static EXTENDED_ACKS: Seen<bool> = Seen::new();

/// Extends to 15 s, hands the `Ack` to a task that acks after 9 s, and returns at once: the
/// runtime's "ack within ack_timeout of returning" must not cut the 15 s back to 3 s.
#[delay_listener(topic = "ack.extend", ack_timeout = "3s")]
async fn extend_then_ack_later(msg: Message<u32>, ack: Ack) {
    EXTENDED_RUNS.push(msg.attempt());
    ack.extend(Duration::from_secs(15)).await.expect("extend");
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(9)).await;
        EXTENDED_ACKS.push(ack.ack().await.is_ok());
    });
}

#[tokio::test]
async fn extend_is_not_overwritten_by_the_runtimes_lease() {
    init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["ack.extend"]).await;
    p.send("ack.extend", &1u32, Duration::ZERO).await.unwrap();
    assert_eq!(
        EXTENDED_ACKS.wait_for(1, WAIT).await,
        [true],
        "the late ack"
    );
    assert_eq!(
        EXTENDED_RUNS.all(),
        [1],
        "handled once, not redelivered at 3 s"
    );
    assert_eq!(drained(&p, "ack.extend", WAIT).await.dead, 0);
    rt.shutdown().await.unwrap();
}

// --- the books of claimed deliveries ----------------------------------------------------

static OUTLIVED: Seen<u32> = Seen::new();

/// The first delivery runs past its claim, which the test expires under it; the runtime
/// delivers the message again, and the first delivery's ack comes back stale.
#[delay_listener(topic = "ack.books")]
async fn outlives_its_claim(msg: Message<u32>) {
    if msg.attempt() == 1 {
        sleep_ms(1_500).await;
    }
    OUTLIVED.push(msg.attempt());
}

#[tokio::test]
async fn a_stale_settle_leaves_the_runtimes_books() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["ack.books"]).await;
    let id = p.send("ack.books", &1u32, Duration::ZERO).await.unwrap();
    let q = delayq_core::protocol::queue(&p, "ack.books").unwrap();
    let inflight = delayq_dev::keys("ack.books").inflight;
    let deadline = Instant::now() + WAIT;
    while delayq_dev::score(&server, &inflight, &id).is_none() || rt.tracked_claims() == 0 {
        assert!(Instant::now() < deadline, "never claimed");
        sleep_ms(10).await;
    }
    assert_eq!(rt.tracked_claims(), 1);
    // Expire the claim under the running handler and requeue it: the runtime claims it again.
    redis::cmd("ZADD")
        .arg(&inflight)
        .arg("XX")
        .arg(0)
        .arg(id.as_str())
        .query::<()>(&mut server.connection())
        .unwrap();
    assert_eq!(q.requeue_expired(10, 16).await.unwrap().requeued, 1);
    let mut attempts = OUTLIVED.wait_for(2, WAIT).await;
    attempts.sort();
    assert_eq!(attempts, [1, 2]);
    drained(&p, "ack.books", WAIT).await;
    sleep_ms(200).await;
    assert_eq!(
        rt.tracked_claims(),
        0,
        "the stale first delivery is still on the books"
    );
    rt.shutdown().await.unwrap();
}
