// Review of dedup_for (6281b35), each failing on that commit: a replayed dead letter is
// pending again (its death's reservation ends), a window of Duration::MAX ends by the year
// 9999, and expired reservations go at most 1,000 a call (windows that end together must not
// hold Redis for one long call).

use std::time::Duration;

use delayq_core::protocol::{NackOutcome, TopicKeys};
use delayq_core::{MessageId, SendOptions, SendOutcome, MAX_DUE_MS};
use delayq_dev::{producer, RedisServer};

fn zscore(server: &RedisServer, key: &str, member: &str) -> Option<f64> {
    redis::cmd("ZSCORE")
        .arg(key)
        .arg(member)
        .query(&mut server.connection())
        .unwrap()
}

/// The rustdoc of `dedup_for`: "While the message is pending or in flight, sends with its id
/// behave as they always do." A dead letter sent with `dedup_for` is reserved when it dies;
/// replayed, it is pending again, yet a `replace` (or `debounce`) send with its id is refused
/// as `Duplicate` by the reservation its death left.
#[tokio::test]
async fn a_replayed_dead_letter_is_pending_but_a_replace_is_refused() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let topic = "review.dedup.replay";
    let q = delayq_core::protocol::queue(&p, topic).unwrap();
    let opts = SendOptions::new()
        .id("inv-9")
        .dedup_for(Duration::from_secs(3600));
    p.send_with(topic, &1u32, opts).await.unwrap();
    let c = q
        .claim_due(10, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(c.len(), 1);
    let out = q
        .nack(
            &c[0].id,
            c[0].token(),
            Duration::ZERO,
            "boom",
            5,
            Some("bad"),
        )
        .await
        .unwrap();
    assert_eq!(out, NackOutcome::Dead);
    let id = MessageId::new("inv-9").unwrap();
    assert!(p.replay_dead(topic, &id).await.unwrap(), "replayed");
    // Pending again: a delayed message with this id.
    let keys = TopicKeys::new("delayq", topic).unwrap();
    assert!(
        zscore(&server, &keys.delayed, "inv-9").is_some(),
        "pending after replay"
    );
    let replace = p
        .send_with(
            topic,
            &2u32,
            SendOptions::new()
                .id("inv-9")
                .replace(true)
                .delay(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert!(
        matches!(replace, SendOutcome::Replaced(_)),
        "a replace of a pending (replayed) message: {replace:?} (the doc: while the message is \
         pending, sends with its id behave as they always do)"
    );
}

/// `SendOptions::dedup_for`'s doc: "Windows past the year 9999 are cut there." The window's
/// length is cut to MAX_DUE_MS (≈ 8,000 years), so the reservation ends after the year 9999.
#[tokio::test]
async fn a_window_of_duration_max_ends_after_the_year_9999() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let topic = "review.dedup.max";
    let q = delayq_core::protocol::queue(&p, topic).unwrap();
    let opts = SendOptions::new().id("forever").dedup_for(Duration::MAX);
    p.send_with(topic, &1u32, opts).await.unwrap();
    let c = q
        .claim_due(10, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(
        q.ack(&[c[0].receipt()]).await.unwrap(),
        [true]
    );
    let keys = TopicKeys::new("delayq", topic).unwrap();
    let until = zscore(&server, &keys.done, "forever").expect("reserved");
    assert!(
        until <= MAX_DUE_MS as f64,
        "the reservation ends at {until} ms, past MAX_DUE_MS {MAX_DUE_MS} (the last ms of 9999)"
    );
}

/// 2,500 reservations whose windows ended together (set up by hand: a burst of sends a day
/// ago): the next reservation removes 1,000 of them, not all at once; the back pool's sweeps
/// take the rest.
#[tokio::test]
async fn expired_reservations_go_a_thousand_a_call() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let topic = "review.dedup.bounded";
    let keys = TopicKeys::new("delayq", topic).unwrap();
    let mut c = server.connection();
    let mut zadd = redis::cmd("ZADD");
    zadd.arg(&keys.done);
    for i in 0..2500 {
        zadd.arg(1_000_000 + i).arg(format!("old-{i}"));
    }
    zadd.query::<()>(&mut c).unwrap();
    let q = delayq_core::protocol::queue(&p, topic).unwrap();
    let opts = SendOptions::new().id("new").dedup_for(Duration::from_secs(60));
    p.send_with(topic, &1u32, opts).await.unwrap();
    let claimed = q
        .claim_due(10, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    q.ack(&[claimed[0].receipt()])
        .await
        .unwrap();
    let left: usize = redis::cmd("ZCARD").arg(&keys.done).query(&mut c).unwrap();
    assert_eq!(left, 1501, "1,000 expired removed, and the new one added");
    for _ in 0..2 {
        q.requeue_expired(100, 16).await.unwrap();
    }
    let left: Vec<String> = redis::cmd("ZRANGE")
        .arg(&keys.done)
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(left, ["new"], "the sweeps took the rest");
}
