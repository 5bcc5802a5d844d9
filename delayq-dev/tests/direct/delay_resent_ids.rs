//! A message id sent again after its first incarnation was settled gets fresh delivery
//! tokens, so a stale delivery of the first can never settle the second. Real processes:
//! consumer A is frozen mid-handler; the id is redelivered to B and acked; the id is sent
//! again and claimed by C; A thaws and its late ack is refused as stale; C is killed with
//! SIGKILL; the re-sent message must still be handled.
//!
//! The consumers' `proc.slow` listener has a 1 s ack timeout.

use std::time::Duration;

use delayq_core::{SendOptions, SendOutcome};
use delayq_dev::{producer, state, wait_until};
use delayq_dev::{read_ledger, ConsumerProcess, RedisServer};

#[tokio::test]
async fn a_stale_delivery_cannot_settle_the_same_id_sent_again() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let p = producer(&server).await;
    let url = server.url();
    let token =
        || delayq_dev::envelope(&server, "proc.slow", &"order-7".parse().unwrap()).map(|e| e.token);
    let send = |payload: u64| {
        let p = p.clone();
        async move {
            p.send_with("proc.slow", &payload, SendOptions::new().id("order-7"))
                .await
        }
    };

    // Delivery A: claimed, then frozen mid-handler (its handler takes 3 s).
    let a = ConsumerProcess::start_logging(&url, &ledger, 3_000, &dir.path().join("a.log"));
    assert!(matches!(send(7).await.unwrap(), SendOutcome::Created(_)));
    let id = "order-7".parse().unwrap();
    wait_until(Duration::from_secs(10), "A to claim", || {
        state(&server, "proc.slow", &id) == "inflight"
    })
    .await;
    a.freeze();
    let token_a = token().unwrap();

    // Delivery B: after A's 1 s deadline, B is handed the message and acks it.
    let b = ConsumerProcess::start(&url, &ledger, 0);
    wait_until(Duration::from_secs(15), "B to handle and ack", || {
        state(&server, "proc.slow", &id) == "gone"
    })
    .await;
    b.stop();

    // The same id, sent again: delivery C claims it and is slow.
    assert!(matches!(send(8).await.unwrap(), SendOutcome::Created(_)));
    let mut c = ConsumerProcess::start(&url, &ledger, 60_000);
    wait_until(Duration::from_secs(10), "C to claim the re-sent id", || {
        state(&server, "proc.slow", &id) == "inflight"
    })
    .await;
    let token_c = token().unwrap();
    assert!(
        token_c > token_a,
        "token {token_c} of C is not past {token_a} of A"
    );

    // A thaws: its handler returns, it records the message, and its ack is refused.
    a.thaw();
    wait_until(Duration::from_secs(10), "A's late handling", || {
        read_ledger(&ledger).iter().any(|l| l.pid == a.pid())
    })
    .await;
    wait_until(Duration::from_secs(10), "A's stale ack", || {
        a.log_text().contains("ack not applied")
    })
    .await;
    assert_eq!(
        state(&server, "proc.slow", &id),
        "inflight",
        "A's stale ack deleted C's message"
    );
    assert_eq!(token(), Some(token_c));

    // C crashes mid-handler: the re-sent message comes back after its deadline and A,
    // running again, handles it.
    c.kill9();
    wait_until(
        Duration::from_secs(20),
        "the re-sent message to be handled",
        || read_ledger(&ledger).iter().any(|l| l.payload == 8),
    )
    .await;
    wait_until(Duration::from_secs(10), "the topic to drain", || {
        state(&server, "proc.slow", &id) == "gone"
    })
    .await;
    let lines = read_ledger(&ledger);
    println!("ledger: {lines:?}");
    assert_eq!(lines.iter().filter(|l| l.payload == 8).count(), 1);
    a.stop();
}
