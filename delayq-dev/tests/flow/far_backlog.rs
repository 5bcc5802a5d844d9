// After claims stopped for longer than a far bucket's width (a pause, an outage, every slot
// busy), due messages still wait in far buckets a claim has not promoted yet, and a bucket of
// more than 1,000 is promoted in portions. Claims keep the promise anyway: among due messages
// the higher priority first, FIFO by due time within one. And the deaths that claims make
// themselves (an envelope that is not one, or that the client cannot read) keep to the
// dead-letter bound like every other death.

use std::time::Duration;

use delayq_core::protocol::{queue, Flow, TopicKeys, TopicQueue};
use delayq_core::{Priority, SendOptions};
use delayq_dev::{bucket_width, farinfo_number, plant_due, producer, redis_ms, sleep_ms, RedisServer};

const LEASE: Duration = Duration::from_secs(60);

/// Claims `max` a call until `n` messages were claimed (or 2,000 calls): (payload, due ms) of
/// each, in claim order.
async fn drain(q: &TopicQueue, max: usize, n: usize) -> Vec<(String, u64)> {
    let mut got = Vec::new();
    for _ in 0..2_000 {
        if got.len() >= n {
            break;
        }
        let batch = q.claim_due(max, LEASE).await.unwrap();
        assert!(batch.undeliverable.is_empty(), "{:?}", batch.undeliverable);
        for d in batch.claimed {
            let tag: String = serde_json::from_slice(&d.envelope.payload).unwrap();
            got.push((tag, d.envelope.due_ms));
        }
    }
    got
}

/// 3,000 normal messages over two 1-second buckets, and one high message due after them in a
/// later bucket; nothing claims until all are due (as after a pause). The first claim takes the
/// high one, then the normal ones go in due order. Before the fix, a claim promoted 1,000 of
/// the first bucket (a random portion), left the high one in its bucket and claimed normal
/// ones first, not the earliest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_claims_stopped_due_far_messages_keep_priority_and_due_order() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.far.prio";
    bucket_width(&server, t, 1000);
    let normal = (0..3000u64).map(|i| (format!("n{i:04}"), Duration::from_millis(3000 + i / 2)));
    p.send_batch(t, normal).await.unwrap();
    let high = SendOptions::new()
        .priority(Priority::High)
        .delay(Duration::from_millis(5200));
    p.send_with(t, &"high".to_string(), high).await.unwrap();
    assert_eq!(farinfo_number(&server, t, "count"), 3001, "all wait in far buckets");
    // Nothing claims until every message is due.
    sleep_ms(5600).await;
    let q = queue(&p, t).unwrap();
    let got = drain(&q, 10, 3001).await;
    assert_eq!(got.len(), 3001, "every message claimed");
    assert_eq!(got[0].0, "high", "the high message first: {:?}", &got[..5]);
    let normal: Vec<&(String, u64)> = got[1..].iter().collect();
    for pair in normal.windows(2) {
        assert!(
            pair[0].1 <= pair[1].1,
            "out of due order: {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
}

/// Without priorities, a bucket of 5,000 due messages (promoted 1,000 a call) is claimed in
/// due order from its first claim on; claims of messages due before the bucket are not held
/// up by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_overdue_bucket_is_claimed_in_due_order() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.far.fifo";
    bucket_width(&server, t, 1000);
    // Due in under a second: in the hot keys, claimed however far behind the buckets are.
    p.send(t, &"hot".to_string(), Duration::from_millis(300))
        .await
        .unwrap();
    let far = (0..5000u64).map(|i| (format!("f{i:04}"), Duration::from_millis(3000 + i / 5)));
    p.send_batch(t, far).await.unwrap();
    assert_eq!(farinfo_number(&server, t, "count"), 5000);
    sleep_ms(4600).await;
    let q = queue(&p, t).unwrap();
    let first = q.claim_due(1, LEASE).await.unwrap();
    assert_eq!(first.claimed.len(), 1, "the hot message is claimed at once");
    let got = drain(&q, 100, 5000).await;
    assert_eq!(got.len(), 5000);
    for pair in got.windows(2) {
        assert!(
            pair[0].1 <= pair[1].1,
            "out of due order: {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
}

/// A claimed message that is not an envelope (moved to the dead letters by the claim) and one
/// the client cannot read (moved there by `bury.lua`) keep the topic within `dead_max`, the
/// drops counted where every other death's are.
#[tokio::test]
async fn deaths_at_the_claim_keep_to_the_dead_letter_bound() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let flow = Flow {
        dead_max: 2,
        ..Flow::default()
    };
    for (t, raw) in [
        // Not an envelope of this layout at all: the claim script buries it.
        ("flow.dead.corrupt", "not an envelope"),
        // An envelope by its first bytes that the client cannot read: bury.lua.
        ("flow.dead.unread", "1 0 0 0 0 0 18446744073709551615 1\nab"),
    ] {
        let q = queue(&p, t).unwrap().with_flow(flow);
        for i in 0..5 {
            plant_due(&server, t, &format!("bad-{i}"), Some(raw));
        }
        let mut undeliverable = 0;
        for _ in 0..5 {
            let batch = q.claim_due(1, LEASE).await.unwrap();
            undeliverable += batch.undeliverable.len();
        }
        assert_eq!(undeliverable, 5, "{t}");
        let dead = p.counts(t).await.unwrap().dead;
        assert_eq!(dead, 2, "{t}: dead letters past dead_max = 2");
        assert_eq!(farinfo_number(&server, t, "dead_dropped"), 3, "{t}: the drops counted");
        assert_eq!(q.take_dead_dropped(), 3, "{t}: the drops reported");
        assert_eq!(p.topic_stats(t).await.unwrap().dead_dropped, 3, "{t}");
    }
}

/// Runs (payload, due ms) that start with the high message, then the normal ones `n0000`,
/// `n0001`, ... (sent two a millisecond) in due order: the first 48 of them are the earliest 48.
fn high_then_earliest_normal(runs: &[(String, u64)]) {
    assert_eq!(runs[0].0, "high", "{:?}", &runs[..5]);
    assert!(
        runs[1..].windows(2).all(|w| w[0].1 <= w[1].1),
        "normal ones out of due order: {:?}",
        &runs[1..10]
    );
    // The earliest due of all: n0000 .. n0047 (two a millisecond, so whole pairs).
    let mut first: Vec<&str> = runs[1..49].iter().map(|r| r.0.as_str()).collect();
    first.sort();
    let earliest: Vec<String> = (0..48).map(|i| format!("n{i:04}")).collect();
    assert_eq!(first, earliest, "not the earliest due normal ones");
}

/// (payload, due ms) of each run.
static RESUMED: delayq_dev::Seen<(String, u64)> = delayq_dev::Seen::new();

#[delayq_runtime::delay_listener(topic = "flow.far.resumed", concurrency = 1)]
async fn resumed_handler(msg: delayq_runtime::Message<String>) {
    let due = msg.due_at().duration_since(std::time::UNIX_EPOCH).unwrap();
    RESUMED.push((msg.payload().clone(), due.as_millis() as u64));
}

/// The same through a running consumer, paused while everything came due, then resumed: the
/// high message runs first, the normal ones after it in due order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_topic_runs_its_overdue_far_messages_by_priority_then_due_time() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.far.resumed";
    bucket_width(&server, t, 1000);
    p.pause(t).await.unwrap();
    let rt = crate::runtime(&server, t).await;
    let normal = (0..2500u64).map(|i| (format!("n{i:04}"), Duration::from_millis(3000 + i / 2)));
    p.send_batch(t, normal).await.unwrap();
    let high = SendOptions::new()
        .priority(Priority::High)
        .delay(Duration::from_millis(4700));
    p.send_with(t, &"high".to_string(), high).await.unwrap();
    sleep_ms(5200).await;
    p.resume(t).await.unwrap();
    let runs = RESUMED.wait_for(50, Duration::from_secs(20)).await;
    rt.shutdown().await.unwrap();
    high_then_earliest_normal(&runs);
}

// --- From the review of the hold: an outage's many buckets, an undeclarable member, the
// metric of the claim's own drops ------------------------------------------------------------

fn base36(mut n: u64) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(digits[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap()
}

/// `n` far buckets of a minute, one fresh message each, ten buckets apart, the last an hour
/// ago: what a long outage leaves (written by hand, as far_place.lua writes them).
fn overdue_buckets(server: &RedisServer, t: &str, n: u64) {
    let k = TopicKeys::new("delayq", t).unwrap();
    let width = 60_000;
    let last = (redis_ms(server) - 3_600_000) / width;
    let mut pipe = redis::pipe();
    pipe.cmd("HSET")
        .arg(&k.farinfo)
        .arg("width")
        .arg(width)
        .arg("count")
        .arg(n)
        .ignore();
    for i in 0..n {
        let b = last - (n - 1 - i) * 10;
        let due = b * width + width / 2;
        let record = format!("F{} {}\n\"old{i:05}\"", base36(width / 2), base36(3_600_000));
        pipe.cmd("HSET")
            .arg(format!("{}:{b}", k.far))
            .arg(format!("old-{i:05}"))
            .arg(record)
            .ignore();
        pipe.cmd("ZADD").arg(&k.far).arg(due).arg(b).ignore();
    }
    pipe.query::<()>(&mut server.connection()).unwrap();
}

/// After an outage that left 3,000 overdue buckets, a topic with priorities claims its due
/// high message first, after promoting them a hundred buckets a call (not one a call: 3,001
/// calls before the claims declared more than one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outages_overdue_buckets_are_promoted_a_hundred_a_call() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.far.outage";
    overdue_buckets(&server, t, 3000);
    let high = SendOptions::new().priority(Priority::High);
    p.send_with(t, &"high".to_string(), high).await.unwrap();
    let q = queue(&p, t).unwrap();
    let mut calls = 0;
    let first = loop {
        calls += 1;
        let batch = q.claim_due(10, LEASE).await.unwrap();
        if let Some(d) = batch.claimed.first() {
            break serde_json::from_slice::<String>(&d.envelope.payload).unwrap();
        }
        assert!(calls < 10_000, "nothing claimed in {calls} calls");
    };
    assert_eq!(first, "high");
    // 3,000 buckets, 100 a call, the first call declaring none of them; ready moved after.
    assert!(calls <= 34, "the first claim after {calls} calls");
    assert_eq!(farinfo_number(&server, t, "count"), 0);
}

/// A `far` member no client can declare (a negative bucket number, by hand) is never
/// promoted; it holds up no claim (before the review it held every claim of the topic).
#[tokio::test]
async fn an_undeclarable_far_member_holds_up_no_claim() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    for (t, opts) in [
        ("flow.far.neg.prio", SendOptions::new().priority(Priority::High)),
        ("flow.far.neg.fifo", SendOptions::new()),
    ] {
        p.send_with(t, &"due".to_string(), opts).await.unwrap();
        redis::cmd("ZADD")
            .arg(TopicKeys::new("delayq", t).unwrap().far)
            .arg(0)
            .arg("-1")
            .query::<()>(&mut server.connection())
            .unwrap();
        let q = queue(&p, t).unwrap();
        let mut claimed = 0;
        for _ in 0..5 {
            claimed += q.claim_due(10, LEASE).await.unwrap().claimed.len();
        }
        assert_eq!(claimed, 1, "{t}: the due message claimed");
    }
}

#[delayq_runtime::delay_listener(topic = "flow.far.dropmetric", dead_max = 2)]
async fn drop_metric_handler(_msg: String) {}

fn dropped_metric(addr: std::net::SocketAddr) -> f64 {
    delayq_dev::scrape_metrics(addr)
        .lines()
        .filter(|l| l.starts_with("delayq_dead_dropped_total"))
        .filter_map(|l| l.rsplit(' ').next()?.trim().parse::<f64>().ok())
        .sum()
}

/// A running consumer counts the claim's own drops in `delayq_dead_dropped_total` at once
/// (before the review, at the back pool's next sweep, up to two minutes later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_counts_the_claims_own_drops_at_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.far.dropmetric";
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], delayq_dev::free_port()).into();
    let rt = delayq_runtime::Runtime::builder()
        .redis_url(server.url())
        .topics([t])
        .prometheus(addr)
        .spawn()
        .await
        .unwrap();
    let k = TopicKeys::new("delayq", t).unwrap();
    for i in 0..5 {
        let id = p
            .send(t, &format!("m{i}"), Duration::from_millis(800))
            .await
            .unwrap();
        // Not an envelope (claim_due.lua buries it), or one the consumer cannot read (bury.lua).
        let raw = if i < 3 {
            "not an envelope"
        } else {
            "1 0 0 0 0 0 18446744073709551615 1\nab"
        };
        redis::cmd("HSET")
            .arg(&k.msg)
            .arg(id.as_str())
            .arg(raw)
            .query::<()>(&mut server.connection())
            .unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while dropped_metric(addr) < 3.0 && std::time::Instant::now() < deadline {
        sleep_ms(100).await;
    }
    let metric = dropped_metric(addr);
    rt.shutdown().await.unwrap();
    assert_eq!(p.counts(t).await.unwrap().dead, 2);
    assert_eq!(metric, 3.0, "delayq_dead_dropped_total within 10 s of the drops");
}

/// (payload, due ms) of each run of `flow.far.busy`.
static BUSY: delayq_dev::Seen<(String, u64)> = delayq_dev::Seen::new();

#[delayq_runtime::delay_listener(topic = "flow.far.busy", concurrency = 1)]
async fn busy_handler(msg: delayq_runtime::Message<String>) {
    let due = msg.due_at().duration_since(std::time::UNIX_EPOCH).unwrap();
    BUSY.push((msg.payload().clone(), due.as_millis() as u64));
    if msg.payload() == "block" {
        sleep_ms(5500).await;
    }
}

/// Every slot busy (one, blocked for over five bucket widths) while far messages come due:
/// when it frees, the high one runs first, then the normal ones in due order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_every_slot_was_busy_overdue_far_messages_keep_priority_and_due_order() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.far.busy";
    bucket_width(&server, t, 1000);
    let rt = crate::runtime(&server, t).await;
    p.send(t, &"block".to_string(), Duration::ZERO).await.unwrap();
    BUSY.wait_for(1, Duration::from_secs(10)).await;
    let normal = (0..2500u64).map(|i| (format!("n{i:04}"), Duration::from_millis(3000 + i / 2)));
    p.send_batch(t, normal).await.unwrap();
    let high = SendOptions::new()
        .priority(Priority::High)
        .delay(Duration::from_millis(4700));
    p.send_with(t, &"high".to_string(), high).await.unwrap();
    let runs = BUSY.wait_for(51, Duration::from_secs(30)).await;
    rt.shutdown().await.unwrap();
    assert_eq!(runs[0].0, "block");
    high_then_earliest_normal(&runs[1..]);
}
