//! Acks ride on claims: while a boss claims again as soon as a slot frees, the acks of the
//! handlers that returned go in its next claim call (`claim_acking`), done after the claim in
//! the same script. These check the call (answers, stale acks, a paused topic, `dedup_for`,
//! the outcome counts), that a drain sends almost no ack call of its own, and that an ack by
//! hand before the handler returns does not give its slot away.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use delayq_core::{SendOptions, SendOutcome};
use delayq_dev::{
    delay_script_sha, drained, keys, producer, runtime, slowlog_script_calls, RedisServer, Seen,
};
use delayq_runtime::{delay_listener, Ack, Message};

const LEASE: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(30);

fn hkeys(server: &RedisServer, key: &str) -> Vec<String> {
    redis::cmd("HKEYS")
        .arg(key)
        .query(&mut server.connection())
        .unwrap()
}

// ---------------------------------------------------------------- the call

#[tokio::test]
async fn a_claim_acks_what_rides_on_it_and_answers_each() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "ride.call";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    let window = Duration::from_secs(60);
    let mut ids = Vec::new();
    for n in 0..3u32 {
        let options = SendOptions::new().id(format!("m{n}")).dedup_for(window);
        match p.send_with(t, &n, options).await.unwrap() {
            SendOutcome::Created(id) => ids.push(id),
            other => panic!("{other:?}"),
        }
    }
    let first = q.claim_due(3, LEASE).await.unwrap();
    assert_eq!(first.claimed.len(), 3);
    let r: Vec<_> = first.claimed.iter().map(|d| d.receipt()).collect();
    // Two real acks and one with a wrong token; then a claim of whatever is due (nothing).
    let wrong = (r[2].0.clone(), r[2].1 + 1000, r[2].2);
    let batch = q
        .claim_acking(5, LEASE, &[r[0].clone(), wrong, r[1].clone()])
        .await
        .unwrap();
    assert_eq!(batch.acked, [true, false, true]);
    assert!(batch.claimed.is_empty());
    let counts = p.counts(t).await.unwrap();
    assert_eq!((counts.delayed, counts.inflight), (0, 1));
    // Acked: the envelope and its token field are gone, the id is reserved for its window.
    let fields = hkeys(&server, &keys(t).msg);
    assert_eq!(fields.len(), 2, "m2 and its token field only: {fields:?}");
    for id in &ids[..2] {
        let again = SendOptions::new().id(id.as_str()).dedup_for(window);
        assert!(matches!(
            p.send_with(t, &9, again).await.unwrap(),
            SendOutcome::Duplicate(_)
        ));
    }
    // The stale one reserved nothing (it is still in flight, its ack to come).
    assert_eq!(reserved(&server, t, &ids[2]), None);
    let stats = p.topic_stats(t).await.unwrap();
    assert_eq!(stats.last_minute.ok, 2);
    // The same ack again is stale: it was done once.
    let batch = q.claim_acking(1, LEASE, &r[..1]).await.unwrap();
    assert_eq!(batch.acked, [false]);

    // Paused: nothing is claimed, but the acks are done.
    assert!(p.pause(t).await.unwrap());
    let batch = q.claim_acking(5, LEASE, &r[2..]).await.unwrap();
    assert!(batch.paused);
    assert_eq!(batch.acked, [true]);
    let counts = p.counts(t).await.unwrap();
    assert_eq!((counts.delayed, counts.inflight), (0, 0));
    assert!(hkeys(&server, &keys(t).msg).is_empty());
    assert_eq!(p.topic_stats(t).await.unwrap().last_minute.ok, 3);
    // Every ack of that call held its token (no table built for them): reserved all the same.
    assert!(reserved(&server, t, &ids[2]).is_some());
}

/// Until when `id` is reserved after its ack (`dedup_for`), ms.
fn reserved(server: &RedisServer, t: &str, id: &delayq_core::MessageId) -> Option<f64> {
    redis::cmd("ZSCORE")
        .arg(&keys(t).done)
        .arg(id.as_str())
        .query(&mut server.connection())
        .unwrap()
}

#[tokio::test]
async fn more_acks_than_one_call_takes_all_get_answers_in_order() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "ride.many";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    let n = 2_500;
    p.send_batch(t, (0..n).map(|i| (i, Duration::ZERO)))
        .await
        .unwrap();
    let mut receipts = Vec::new();
    while receipts.len() < n {
        let b = q.claim_due(1_000, LEASE).await.unwrap();
        receipts.extend(b.claimed.iter().map(|d| d.receipt()));
    }
    // Every third one stale: a token no claim gave.
    for r in receipts.iter_mut().step_by(3) {
        r.1 += 1_000_000;
    }
    let batch = q.claim_acking(1, LEASE, &receipts).await.unwrap();
    assert_eq!(batch.acked.len(), n);
    for (i, acked) in batch.acked.iter().enumerate() {
        assert_eq!(*acked, i % 3 != 0, "answer {i}");
    }
    assert_eq!(p.counts(t).await.unwrap().inflight, n / 3 + 1);
}

// ---------------------------------------------------------------- the runtime

static DRAINED: AtomicUsize = AtomicUsize::new(0);

#[delay_listener(topic = "ride.drain", concurrency = 20)]
async fn drain_handler(_msg: Message<u32>) {
    DRAINED.fetch_add(1, Ordering::Relaxed);
}

#[tokio::test]
async fn a_drain_acks_on_its_claims_not_in_calls_of_their_own() {
    // Every command in the slow log, so that each script call can be told by its sha.
    let server = RedisServer::builder()
        .config("slowlog-log-slower-than", "0")
        .config("slowlog-max-len", "100000")
        .start();
    let p = producer(&server).await;
    let t = "ride.drain";
    let n = 3_000;
    let (claim, ack) = (delay_script_sha("claim_due"), delay_script_sha("ack"));
    p.send_batch(t, (0..n).map(|i| (i, Duration::ZERO)))
        .await
        .unwrap();
    let _: () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query(&mut server.connection())
        .unwrap();
    let rt = runtime(&server, &[t]).await;
    drained(&p, t, WAIT).await;
    assert_eq!(DRAINED.load(Ordering::Relaxed), n);
    rt.shutdown().await.unwrap();
    let calls = slowlog_script_calls(&mut server.connection());
    let claims = calls.iter().filter(|a| a[0] == claim).count();
    let acks = calls.iter().filter(|a| a[0] == ack).count();
    eprintln!("{claims} claim calls, {acks} ack calls for {n} messages");
    assert_eq!(p.topic_stats(t).await.unwrap().last_minute.ok, n as u64);
    // Without riding, a drain sends about one ack call per claim call.
    assert!(claims >= n / 20, "{claims} claim calls for {n} messages");
    assert!(
        acks * 10 <= claims,
        "{acks} ack calls beside {claims} claim calls: the acks did not ride on the claims"
    );
}

static RUNNING: AtomicUsize = AtomicUsize::new(0);
static MOST: AtomicUsize = AtomicUsize::new(0);
static EARLY: Seen<u32> = Seen::new();

#[delay_listener(topic = "ride.early", concurrency = 2)]
async fn early_handler(msg: u32, ack: Ack) {
    let now = RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
    MOST.fetch_max(now, Ordering::SeqCst);
    // Acked by hand first, then still running: its slot stays taken until it returns.
    ack.ack().await.expect("ack");
    tokio::time::sleep(Duration::from_millis(50)).await;
    RUNNING.fetch_sub(1, Ordering::SeqCst);
    EARLY.push(msg);
}

#[tokio::test]
async fn an_ack_by_hand_before_the_handler_returns_keeps_its_slot() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "ride.early";
    let rt = runtime(&server, &[t]).await;
    p.send_batch(t, (0..20u32).map(|i| (i, Duration::ZERO)))
        .await
        .unwrap();
    EARLY.wait_for(20, WAIT).await;
    drained(&p, t, WAIT).await;
    rt.shutdown().await.unwrap();
    assert_eq!(MOST.load(Ordering::SeqCst), 2, "handlers running at once");
}
