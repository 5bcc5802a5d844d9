// Bounded dead letters on streams (#34 item 8): a stream listener's `dead_max` keeps the
// newest dead letters of its stream, and `dead_ttl` drops expired ones at the next cleanup
// step, with no new death needed.

use std::time::Duration;

use delayq_core::protocol::{dead_stream, RedisConn, StreamGroup, TakeOver};
use delayq_dev::{producer, sleep_ms, stream_runtime, RedisServer, Seen};
use delayq_runtime::{stream_listener, Ack, StreamMessage};

static BURIED: Seen<u32> = Seen::new();

#[stream_listener(stream = "st.bounded", group = "g", concurrency = 1, dead_max = 3)]
async fn bury_all(msg: StreamMessage<u32>, ack: Ack) {
    ack.dead_letter("no").await.unwrap();
    BURIED.push(*msg.payload());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_keeps_its_newest_dead_letters_up_to_dead_max() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = stream_runtime(&server, &["st.bounded"]).await;
    for n in 0..8u32 {
        p.publish("st.bounded", &n).await.unwrap();
    }
    BURIED.wait_for(8, Duration::from_secs(10)).await;
    let dead = p
        .stream_dead_letters("st.bounded", "g", 0..100)
        .await
        .unwrap();
    let kept: Vec<u32> = dead
        .iter()
        .map(|d| serde_json::from_slice(&d.payload).unwrap())
        .collect();
    assert_eq!(kept, [5, 6, 7], "the newest three, oldest first");
    rt.shutdown().await.unwrap();
}

/// A take-over step that claims nothing and cleans up (where a group trims its dead letters).
fn cleanup_step() -> TakeOver<'static> {
    TakeOver {
        alive_ttl: Duration::from_secs(10),
        min_idle: Duration::from_secs(60),
        count: 0,
        max_deliveries: 16,
        cursor: None,
        cleanup: true,
    }
}

#[tokio::test]
async fn expired_stream_dead_letters_go_at_the_next_cleanup_step() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let conn = RedisConn::connect(&server.url(), delayq_core::UrlOrigin::Default)
        .await
        .unwrap();
    let group = StreamGroup::new(conn.clone(), "st.ttl", "g", "c1")
        .unwrap()
        .with_dead_bounds(10_000, 1_000);
    group.create(true).await.unwrap();
    for n in 0..2u32 {
        p.publish("st.ttl", &n).await.unwrap();
    }
    for e in group.read(&conn, 10, Duration::ZERO).await.unwrap() {
        assert!(group.dead_letter(&e.id, "test").await.unwrap());
    }
    assert_eq!(group.take_dead_dropped(), 0);
    sleep_ms(1_100).await;
    group.take_over(cleanup_step()).await.unwrap();
    assert_eq!(group.take_dead_dropped(), 2);
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let len: usize = redis::cmd("XLEN")
        .arg(dead_stream("st.ttl"))
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(len, 0);
}

/// The dead-letter stream is shared by the stream's groups: it keeps what the loosest group's
/// bounds keep, whichever group trims it, and `stream_stats` counts what went.
#[tokio::test]
async fn a_strict_group_does_not_trim_a_looser_groups_dead_letters() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let conn = RedisConn::connect(&server.url(), delayq_core::UrlOrigin::Default)
        .await
        .unwrap();
    let strict = StreamGroup::new(conn.clone(), "st.shared", "strict", "c1")
        .unwrap()
        .with_dead_bounds(2, 3_600_000);
    let loose = StreamGroup::new(conn.clone(), "st.shared", "loose", "c2")
        .unwrap()
        .with_dead_bounds(5, 3_600_000);
    strict.create(true).await.unwrap();
    loose.create(true).await.unwrap();
    loose.take_over(cleanup_step()).await.unwrap(); // records its bounds
    for n in 0..6u32 {
        p.publish("st.shared", &n).await.unwrap();
    }
    for e in strict.read(&conn, 10, Duration::ZERO).await.unwrap() {
        assert!(strict.dead_letter(&e.id, "test").await.unwrap());
    }
    let stats = p.stream_stats("st.shared").await.unwrap();
    assert_eq!((stats.dead, stats.dead_dropped), (5, 1), "{stats:?}");
    assert_eq!(strict.take_dead_dropped(), 1);
}

static LATER: Seen<(u32, u32)> = Seen::new();

/// `retry_after` on a stream entry: back after the delay, the delivery not counted, so three
/// of them do not use up `max_deliveries = 2`.
#[stream_listener(stream = "st.later", group = "g", max_deliveries = 2, min_idle = "1s")]
async fn later_stream(msg: StreamMessage<u32>, ack: Ack) {
    LATER.push((*msg.payload(), msg.deliveries()));
    if LATER.all().len() <= 3 {
        ack.retry_after(Duration::from_millis(200)).await.unwrap();
    } else {
        ack.ack().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_entry_told_retry_after_keeps_its_deliveries() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = stream_runtime(&server, &["st.later"]).await;
    p.publish("st.later", &1u32).await.unwrap();
    let runs = LATER.wait_for(4, Duration::from_secs(30)).await;
    assert!(runs.iter().all(|(_, d)| *d == 1), "deliveries counted: {runs:?}");
    let dead = p.stream_dead_letters("st.later", "g", 0..10).await.unwrap();
    assert!(dead.is_empty(), "{dead:?}");
    rt.shutdown().await.unwrap();
}
