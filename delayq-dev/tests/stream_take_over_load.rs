//! Take-over under load: a consumer claims no more idle entries than it can start now, so
//! nothing it took over waits unrenewed for a slot and is taken over again by another. Also,
//! a listener whose only slot is held by an idle blocking read still takes over orphans.

use std::collections::HashMap;
use std::time::Duration;

use delayq_dev::{init_tracing, pending_entries, producer, sleep_ms, stream_runtime};
use delayq_dev::{wait_until, RedisServer, Seen};
use delayq_runtime::{stream_listener, StreamMessage};

/// Leaves `n` entries of `stream` pending for a consumer `ghost` that never comes back.
async fn orphan_entries(server: &RedisServer, stream: &str, n: u32) {
    let p = producer(server).await;
    for i in 0..n {
        p.publish(stream, &i).await.unwrap();
    }
    let mut c = server.connection();
    let _: () = redis::cmd("XGROUP")
        .arg(&["CREATE", stream, "g", "0", "MKSTREAM"])
        .query(&mut c)
        .unwrap();
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(&["GROUP", "g", "ghost", "COUNT"])
        .arg(n)
        .arg(&["STREAMS", stream, ">"])
        .query(&mut c)
        .unwrap();
    assert_eq!(pending_entries(server, stream, "g"), u64::from(n));
}

/// Ids that ran more than once, with their counts.
fn twice(runs: &[String]) -> Vec<(String, usize)> {
    let mut counts: HashMap<&String, usize> = HashMap::new();
    for id in runs {
        *counts.entry(id).or_default() += 1;
    }
    let mut more: Vec<_> = counts
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(id, n)| (id.clone(), n))
        .collect();
    more.sort();
    more
}

static SLOW: Seen<String> = Seen::new();

#[stream_listener(stream = "st.orphans", group = "g", concurrency = 100, min_idle = "1s")]
async fn slow(msg: StreamMessage<u32>) {
    tokio::time::sleep(Duration::from_secs(3)).await;
    SLOW.push(msg.id().to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_beyond_the_free_slots_run_once_on_two_busy_consumers() {
    init_tracing();
    let server = RedisServer::start();
    orphan_entries(&server, "st.orphans", 250).await;
    sleep_ms(1_100).await; // idle past min_idle
    let a = stream_runtime(&server, &["st.orphans"]).await;
    let b = stream_runtime(&server, &["st.orphans"]).await;
    wait_until(Duration::from_secs(60), "250 entries handled", || {
        SLOW.len() >= 250
    })
    .await;
    wait_until(Duration::from_secs(10), "all acked", || {
        pending_entries(&server, "st.orphans", "g") == 0
    })
    .await;
    sleep_ms(3_500).await; // a second run of any entry would end by now
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    let runs = SLOW.all();
    let doubled = twice(&runs);
    assert!(
        doubled.is_empty(),
        "{} of 250 entries ran more than once: {doubled:?}",
        doubled.len()
    );
    assert_eq!(runs.len(), 250);
}

static SINGLE: Seen<String> = Seen::new();

#[stream_listener(stream = "st.one.slot", group = "g", concurrency = 1, min_idle = "1s")]
async fn single(msg: StreamMessage<u32>) {
    SINGLE.push(msg.id().to_string());
}

/// The reader blocks up to a minute on an idle stream, holding the only slot: the take-over
/// must still get it for the orphans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_read_does_not_keep_the_take_over_from_the_only_slot() {
    init_tracing();
    let server = RedisServer::start();
    let rt = stream_runtime(&server, &["st.one.slot"]).await;
    sleep_ms(500).await; // the reader is blocked on the empty stream with the one slot
    let p = producer(&server).await;
    for i in 0..3u32 {
        p.publish("st.one.slot", &i).await.unwrap();
    }
    // The runtime's reader takes those; now orphan more under a ghost consumer.
    wait_until(Duration::from_secs(10), "the first 3", || SINGLE.len() >= 3).await;
    let mut c = server.connection();
    for i in 0..5u32 {
        p.publish("st.one.slot", &(100 + i)).await.unwrap();
    }
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(&[
            "GROUP",
            "g",
            "ghost",
            "COUNT",
            "5",
            "STREAMS",
            "st.one.slot",
            ">",
        ])
        .query(&mut c)
        .unwrap();
    // min_idle 1 s, take-over every 500 ms: well within 10 s, not after the minute's read.
    wait_until(Duration::from_secs(10), "the 5 orphans taken over", || {
        SINGLE.len() >= 8
    })
    .await;
    rt.shutdown().await.unwrap();
    assert!(twice(&SINGLE.all()).is_empty());
}

static TRIM: Seen<u32> = Seen::new();

#[stream_listener(stream = "st.trim", group = "g", min_idle = "1s")]
async fn trim(n: u32) {
    TRIM.push(n);
}

/// A pending entry trimmed from the stream (MAXLEN) cannot run: the take-over records it in
/// the dead-letter stream as `trimmed` and acks it, instead of Redis dropping it from the
/// pending list without a trace; the entries still in the stream run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_entry_trimmed_from_the_stream_is_recorded_as_trimmed() {
    init_tracing();
    let server = RedisServer::start();
    orphan_entries(&server, "st.trim", 10).await;
    let mut c = server.connection();
    // Keep the last 4: the first 6 pending entries are trimmed away.
    let _: u64 = redis::cmd("XTRIM")
        .arg(&["st.trim", "MAXLEN", "4"])
        .query(&mut c)
        .unwrap();
    sleep_ms(1_100).await;
    let rt = stream_runtime(&server, &["st.trim"]).await;
    let p = producer(&server).await;
    let letters =
        delayq_dev::stream_dead_letters(&p, "st.trim", "g", 6, Duration::from_secs(10)).await;
    assert_eq!(letters.len(), 6, "{letters:?}");
    assert!(letters.iter().all(|l| l.reason == "trimmed"), "{letters:?}");
    let mut ran = TRIM.wait_for(4, Duration::from_secs(10)).await;
    ran.sort_unstable();
    assert_eq!(ran, [6, 7, 8, 9], "the entries still in the stream ran");
    wait_until(Duration::from_secs(5), "nothing pending", || {
        pending_entries(&server, "st.trim", "g") == 0
    })
    .await;
    rt.shutdown().await.unwrap();
}
