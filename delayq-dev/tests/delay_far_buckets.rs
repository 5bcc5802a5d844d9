//! Far buckets (layout 2): a message due later than about two buckets from now waits in the
//! far bucket of its due time, out of the hot keys, and is promoted into them a bucket before
//! it is due. These tests give their topics 1-second buckets (the default is a minute), so
//! promotion happens within seconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{bucket_width, producer, RedisServer, Seen};
use delayq_runtime::{
    delay_listener, Cancelled, Message, MessageId, Runtime, SendOptions, SendOutcome,
};

const WAIT: Duration = Duration::from_secs(30);

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// (messages in the hot `delayed` set, messages in far buckets by the count, far bucket keys)
fn where_held(server: &RedisServer, topic: &str) -> (u64, u64, Vec<String>) {
    let mut c = server.connection();
    let hot: u64 = redis::cmd("ZCARD")
        .arg(format!("delayq:{{{topic}}}:delayed"))
        .query(&mut c)
        .unwrap();
    let far: Option<u64> = redis::cmd("HGET")
        .arg(format!("delayq:{{{topic}}}:farinfo"))
        .arg("count")
        .query(&mut c)
        .unwrap();
    let mut buckets: Vec<String> = redis::cmd("KEYS")
        .arg(format!("delayq:{{{topic}}}:far:*"))
        .query(&mut c)
        .unwrap();
    buckets.sort();
    (hot, far.unwrap_or(0), buckets)
}

fn far_members(server: &RedisServer, bucket_key: &str) -> Vec<String> {
    redis::cmd("HKEYS")
        .arg(bucket_key)
        .query(&mut server.connection())
        .unwrap()
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn runtime(server: &RedisServer, topic: &str) -> delayq_runtime::RuntimeHandle {
    Runtime::builder()
        .redis_url(server.url())
        .topics([topic])
        .shutdown_grace(Duration::from_secs(5))
        .spawn()
        .await
        .unwrap()
}

/// (id, due ms, started ms)
static EDGE: Seen<(String, u64, u64)> = Seen::new();

#[delay_listener(topic = "far.edge", concurrency = 200)]
async fn on_edge(msg: Message<u32>) {
    let started = unix_ms(SystemTime::now());
    EDGE.push((msg.id().to_string(), unix_ms(msg.due_at()), started));
}

#[tokio::test]
async fn delay_far_messages_wait_out_of_the_hot_keys_and_are_promoted_never_early() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    bucket_width(&server, "far.edge", 1000);

    // Three messages around one bucket edge: its last millisecond before, exactly on it (the
    // first millisecond of the next bucket), and one after.
    let edge = (unix_ms(SystemTime::now()) / 1000 + 4) * 1000;
    let mut ids = Vec::new();
    for (n, at) in [(1u32, edge - 1), (2, edge), (3, edge + 1)] {
        let at = UNIX_EPOCH + Duration::from_millis(at);
        ids.push(p.send_at("far.edge", &n, at).await.unwrap());
    }
    // And 2,500 in one bucket, more than one promotion moves (1,000 a call).
    let big: Vec<(u32, Duration)> = (0..2_500)
        .map(|n| (n, Duration::from_millis(3_500)))
        .collect();
    let big_ids = p.send_batch("far.edge", big).await.unwrap();

    let (hot, far, buckets) = where_held(&server, "far.edge");
    assert_eq!(
        (hot, far),
        (0, 2_503),
        "all wait in far buckets: {buckets:?}"
    );
    let edge_bucket = format!("delayq:{{far.edge}}:far:{}", edge / 1000);
    let before_bucket = format!("delayq:{{far.edge}}:far:{}", edge / 1000 - 1);
    assert!(far_members(&server, &before_bucket).contains(&ids[0].to_string()));
    assert!(far_members(&server, &edge_bucket).contains(&ids[1].to_string()));
    assert!(far_members(&server, &edge_bucket).contains(&ids[2].to_string()));
    let stats = p.topic_stats("far.edge").await.unwrap();
    assert_eq!(stats.delayed, 2_503);
    assert!(stats.next_due.is_some());
    let peeked = p.peek("far.edge", 0..3).await.unwrap();
    assert_eq!(peeked.len(), 3, "peek reads far buckets");
    assert!(
        peeked.windows(2).all(|w| w[0].due_at <= w[1].due_at),
        "earliest first: {peeked:?}"
    );

    let rt = runtime(&server, "far.edge").await;
    wait_for("2,503 handled", || EDGE.len() >= 2_503).await;
    rt.shutdown().await.unwrap();

    let seen = EDGE.all();
    let mut handled: Vec<&str> = seen.iter().map(|(id, _, _)| id.as_str()).collect();
    handled.sort();
    handled.dedup();
    assert_eq!(handled.len(), 2_503, "every message handled");
    for id in ids.iter().chain(&big_ids) {
        assert!(handled.binary_search(&id.as_str()).is_ok(), "{id} handled");
    }
    let early: Vec<_> = seen
        .iter()
        .filter(|(_, due, started)| started < due)
        .collect();
    assert!(early.is_empty(), "started before due: {early:?}");
    let edge_dues: Vec<u64> = seen
        .iter()
        .filter(|(id, _, _)| ids.iter().any(|i| i.as_str() == id))
        .map(|(_, due, _)| *due)
        .collect();
    assert_eq!(edge_dues.len(), 3);
    for due in [edge - 1, edge, edge + 1] {
        assert!(
            edge_dues.contains(&due),
            "due {due} kept through promotion: {edge_dues:?}"
        );
    }
    let (hot, far, buckets) = where_held(&server, "far.edge");
    assert_eq!((hot, far), (0, 0));
    assert!(
        buckets.is_empty(),
        "promoted buckets are deleted: {buckets:?}"
    );
}

static MOVED: Seen<(String, u64, u64)> = Seen::new();

#[delay_listener(topic = "far.moved")]
async fn on_moved(msg: Message<u32>) {
    let started = unix_ms(SystemTime::now());
    MOVED.push((msg.id().to_string(), unix_ms(msg.due_at()), started));
}

fn far_index(server: &RedisServer, topic: &str) -> Vec<String> {
    redis::cmd("HKEYS")
        .arg(format!("delayq:{{{topic}}}:where"))
        .query(&mut server.connection())
        .unwrap()
}

fn bucket_of(server: &RedisServer, topic: &str, id: &MessageId) -> Option<u64> {
    let (_, _, buckets) = where_held(server, topic);
    buckets
        .iter()
        .find(|b| far_members(server, b).contains(&id.to_string()))
        .map(|b| b.rsplit(':').next().unwrap().parse().unwrap())
}

#[tokio::test]
async fn delay_reschedule_cancel_and_dedup_across_far_buckets() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "far.moved";
    bucket_width(&server, t, 1000);

    // A generated id: found by its time, no index entry.
    let a = p.send(t, &1u32, Duration::from_secs(30)).await.unwrap();
    let first = bucket_of(&server, t, &a).expect("a is far");
    assert!(
        far_index(&server, t).is_empty(),
        "a generated id needs no index entry"
    );
    // Rescheduled to another far bucket: its id no longer tells the bucket, the index does.
    assert!(p.reschedule(t, &a, Duration::from_secs(60)).await.unwrap());
    let second = bucket_of(&server, t, &a).expect("a is still far");
    assert!(
        second >= first + 29,
        "moved from bucket {first} to {second}"
    );
    assert_eq!(far_index(&server, t), [a.to_string()]);
    assert_eq!(where_held(&server, t).1, 1);
    // Cancelled in its far bucket.
    assert_eq!(p.cancel(t, &a).await.unwrap(), Cancelled::Removed);
    assert_eq!(p.cancel(t, &a).await.unwrap(), Cancelled::NotFound);
    assert!(!p.reschedule(t, &a, Duration::from_secs(5)).await.unwrap());
    assert_eq!(where_held(&server, t), (0, 0, vec![]));
    assert!(far_index(&server, t).is_empty());

    // A user id: deduplicated and replaced while far.
    let order = SendOptions::new()
        .id("order-7")
        .delay(Duration::from_secs(30));
    let sent = p.send_with(t, &2u32, order.clone()).await.unwrap();
    assert!(matches!(sent, SendOutcome::Created(_)));
    let again = p.send_with(t, &3u32, order.clone()).await.unwrap();
    assert!(matches!(again, SendOutcome::Duplicate(_)), "{again:?}");
    let replaced = p
        .send_with(t, &4u32, order.delay(Duration::from_secs(40)).replace(true))
        .await
        .unwrap();
    assert!(matches!(replaced, SendOutcome::Replaced(_)), "{replaced:?}");
    let id = replaced.id().clone();
    assert_eq!(where_held(&server, t).1, 1, "one message after the replace");
    let shown = p.peek(t, 0..10).await.unwrap();
    assert_eq!(shown.len(), 1);
    assert_eq!(serde_json::from_slice::<u32>(&shown[0].payload).unwrap(), 4);

    // Far to hot: rescheduled to half a second from now, it is handled then.
    assert!(p
        .reschedule(t, &id, Duration::from_millis(500))
        .await
        .unwrap());
    assert_eq!(where_held(&server, t), (1, 0, vec![]));
    // Hot to far: a message due soon, rescheduled three seconds out.
    let b = p.send(t, &5u32, Duration::from_millis(300)).await.unwrap();
    assert!(p.reschedule(t, &b, Duration::from_secs(3)).await.unwrap());
    assert!(
        bucket_of(&server, t, &b).is_some(),
        "b moved to a far bucket"
    );

    let rt = runtime(&server, t).await;
    wait_for("both handled", || MOVED.len() >= 2).await;
    rt.shutdown().await.unwrap();
    let seen = MOVED.all();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (_, due, started) in &seen {
        assert!(started >= due, "never early: {seen:?}");
    }
    assert_eq!(where_held(&server, t), (0, 0, vec![]));
}

/// (attempt, due ms, started ms)
static RETRIED: Seen<(u32, u64, u64)> = Seen::new();

#[delay_listener(topic = "far.retry", backoff = "fixed(3s)")]
async fn on_retry(msg: Message<u32>) -> Result<(), String> {
    let started = unix_ms(SystemTime::now());
    RETRIED.push((msg.attempt(), unix_ms(msg.due_at()), started));
    if msg.attempt() == 1 {
        return Err("first run fails".into());
    }
    Ok(())
}

#[tokio::test]
async fn delay_a_retry_with_a_long_backoff_waits_in_a_far_bucket() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "far.retry";
    bucket_width(&server, t, 1000);
    let rt = runtime(&server, t).await;
    let id = p.send(t, &1u32, Duration::ZERO).await.unwrap();
    wait_for("the first run", || !RETRIED.is_empty()).await;
    // The 3 s backoff is more than a bucket ahead: the retry waits far, with its full
    // envelope (attempt and last error kept).
    wait_for("the retry in a far bucket", || {
        where_held(&server, t).1 == 1
    })
    .await;
    assert_eq!(where_held(&server, t).0, 0, "not in the hot keys");
    let peeked = p.peek(t, 0..1).await.unwrap();
    assert_eq!(peeked[0].id, id);
    assert_eq!(peeked[0].attempts, 1);
    assert_eq!(peeked[0].last_error.as_deref(), Some("first run fails"));
    wait_for("the second run", || RETRIED.len() >= 2).await;
    rt.shutdown().await.unwrap();
    let runs = RETRIED.all();
    assert_eq!(runs.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2]);
    let (_, due, started) = runs[1];
    assert!(
        started >= due,
        "the retry ran before its due time: {runs:?}"
    );
    assert!(due >= runs[0].2 + 2_900, "after the 3 s backoff: {runs:?}");
    assert_eq!(where_held(&server, t), (0, 0, vec![]));
}
