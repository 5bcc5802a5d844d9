//! One delivery acked twice at once (a handler that joins two `ack()` calls; the ack task
//! puts both in one call, or both ride on one claim): the message leaves Redis once, so it is
//! counted once, and the second ack is answered stale, as a second ack after the first is.
//! Before, the script read both tokens before it deleted anything and counted two handled.
//! (Found in an adversarial review.)

use std::time::Duration;

use delayq_dev::{producer, runtime, sleep_ms, state, RedisServer, Seen};
use delayq_runtime::{delay_listener, Ack, Message};

const LEASE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn one_delivery_twice_in_one_ack_call_is_acked_and_counted_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "twice.ack";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    let id = p.send(t, &1u32, Duration::ZERO).await.unwrap();
    let other = p.send(t, &2u32, Duration::ZERO).await.unwrap();
    let b = q.claim_due(10, LEASE).await.unwrap();
    assert_eq!(b.claimed.len(), 2);
    let r: Vec<_> = b.claimed.iter().map(|d| d.receipt()).collect();
    let first = r.iter().position(|x| x.0 == id).unwrap();
    let (dup, rest) = (r[first].clone(), r[1 - first].clone());
    let answers = q.ack(&[dup.clone(), rest, dup]).await.unwrap();
    assert_eq!(answers, [true, true, false]);
    assert_eq!(state(&server, t, &id), "gone");
    assert_eq!(state(&server, t, &other), "gone");
    assert_eq!(p.topic_stats(t).await.unwrap().last_minute.ok, 2);
}

#[tokio::test]
async fn one_delivery_twice_riding_on_a_claim_is_acked_and_counted_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "twice.ride";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    p.send(t, &1u32, Duration::ZERO).await.unwrap();
    let b = q.claim_due(10, LEASE).await.unwrap();
    let r = b.claimed[0].receipt();
    let b = q.claim_acking(5, LEASE, &[r.clone(), r]).await.unwrap();
    assert_eq!(b.acked, [true, false]);
    assert_eq!(p.topic_stats(t).await.unwrap().last_minute.ok, 1);
}

static SEEN: Seen<String> = Seen::new();

#[delay_listener(topic = "twice.handler", ack_timeout = "60s")]
async fn acks_twice_at_once(_msg: Message<u32>, ack: Ack) {
    let (a, b) = tokio::join!(ack.ack(), ack.ack());
    SEEN.push(format!("{:?} {:?}", a.is_ok(), b.is_ok()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_acking_twice_at_once_is_counted_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "twice.handler";
    let rt = runtime(&server, &[t]).await;
    p.send(t, &1u32, Duration::ZERO).await.unwrap();
    let seen = SEEN.wait_for(1, Duration::from_secs(10)).await;
    sleep_ms(200).await;
    rt.shutdown().await.unwrap();
    let stats = p.topic_stats(t).await.unwrap();
    let h = p
        .topic_history(t, Duration::from_secs(3_600))
        .await
        .unwrap();
    let ok: u64 = h.points.iter().map(|p| p.ok).sum();
    assert_eq!(
        (stats.last_minute.ok, ok),
        (1, 1),
        "(stats ok, history ok); the two acks answered {seen:?}"
    );
    assert!(
        seen[0] == "true false" || seen[0] == "false true",
        "one ack done, the other stale: {seen:?}"
    );
}
