// Item 6, priorities: among due messages the higher priority is claimed first, FIFO by due
// time within one, never early; a message waiting in `ready` is pending to every other call
// (cancel, replace, reschedule, peek, counts); a far wait keeps the priority; a topic that
// never uses priorities never gets `ready`.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use delayq_core::protocol::TopicKeys;
use delayq_core::{Cancelled, MessageId, Priority, SendOptions, SendOutcome};
use delayq_dev::{producer, sleep_ms, RedisServer};
use delayq_runtime::testing::TestRuntime;
use delayq_runtime::delay_listener;

/// (payload, when it ran).
static RUNS: Mutex<Vec<(String, Instant)>> = Mutex::new(Vec::new());

#[delay_listener(topic = "flow.prio", concurrency = 1)]
async fn prio_handler(tag: String) {
    RUNS.lock().unwrap().push((tag, Instant::now()));
}

async fn wait_runs(runs: &Mutex<Vec<(String, Instant)>>, n: usize) -> Vec<(String, Instant)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let all = runs.lock().unwrap().clone();
        if all.len() >= n || Instant::now() > deadline {
            return all;
        }
        sleep_ms(10).await;
    }
}

fn exists(server: &RedisServer, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query(&mut server.connection())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn due_messages_run_by_priority_then_due_time_and_never_early() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.prio";
    // A backlog built while paused, sent interleaved: low, normal, high, level 250, ...
    p.pause(t).await.unwrap();
    let levels: [(&str, Priority); 4] = [
        ("low", Priority::Low),
        ("normal", Priority::Normal),
        ("high", Priority::High),
        ("top", Priority::from(250)),
    ];
    for i in 0..8 {
        for (name, level) in levels {
            let opts = SendOptions::new().priority(level);
            p.send_with(t, &format!("{name}-{i}"), opts).await.unwrap();
            // Due times apart: messages due in the same millisecond have no order.
            sleep_ms(2).await;
        }
    }
    // The highest priority, due later: it waits for its time, whatever else is due.
    let late_sent = Instant::now();
    let late = SendOptions::new()
        .priority(Priority::from(255))
        .delay(Duration::from_millis(1500));
    p.send_with(t, &"late".to_string(), late).await.unwrap();
    let rt = crate::runtime(&server, t).await;
    p.resume(t).await.unwrap();
    let runs = wait_runs(&RUNS, 33).await;
    rt.shutdown().await.unwrap();
    let order: Vec<&str> = runs.iter().map(|(tag, _)| tag.as_str()).collect();
    let mut expected: Vec<String> = Vec::new();
    for name in ["top", "high", "normal", "low"] {
        expected.extend((0..8).map(|i| format!("{name}-{i}")));
    }
    assert_eq!(
        &order[..32],
        expected.iter().map(String::as_str).collect::<Vec<_>>(),
        "run order"
    );
    assert_eq!(order.get(32), Some(&"late"), "{order:?}");
    let late_ran = runs[32].1 - late_sent;
    assert!(
        late_ran >= Duration::from_millis(1490),
        "a level-255 message ran {late_ran:?} after it was sent with a delay of 1.5 s"
    );
    let keys = TopicKeys::new("delayq", t).unwrap();
    assert!(
        !exists(&server, &keys.ready),
        "ready left behind after the drain"
    );
}

static HELD: Mutex<Vec<(String, Instant)>> = Mutex::new(Vec::new());

/// One run a minute: the first claim moves every due message to `ready` and takes one; the
/// rest wait there, due, for the calls below.
#[delay_listener(topic = "flow.prio.held", rate = "1/m")]
async fn held_handler(tag: String) {
    HELD.lock().unwrap().push((tag, Instant::now()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_waiting_in_ready_is_pending_to_cancel_replace_reschedule_peek_and_counts() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.prio.held";
    let keys = TopicKeys::new("delayq", t).unwrap();
    p.pause(t).await.unwrap();
    for (id, level) in [
        ("a", Priority::Low),
        ("b", Priority::High),
        ("c", Priority::Normal),
        ("d", Priority::High),
        ("e", Priority::Low),
    ] {
        let opts = SendOptions::new().id(id).priority(level);
        p.send_with(t, &id.to_string(), opts).await.unwrap();
        sleep_ms(2).await;
    }
    let rt = crate::runtime(&server, t).await;
    p.resume(t).await.unwrap();
    let first = wait_runs(&HELD, 1).await;
    assert_eq!(first[0].0, "b", "the first high one runs first");
    sleep_ms(100).await;
    let ready: Vec<String> = redis::cmd("ZRANGE")
        .arg(&keys.ready)
        .arg(0)
        .arg(-1)
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(ready, ["d", "c", "a", "e"], "waiting in ready, in claim order");

    // Pending to every call: counts, peek (in claim order, with due times), send, cancel.
    assert_eq!(p.counts(t).await.unwrap().delayed, 4);
    assert_eq!(p.topic_stats(t).await.unwrap().delayed, 4);
    let peek = p.peek(t, 0..10).await.unwrap();
    let ids: Vec<&str> = peek.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["d", "c", "a", "e"]);
    assert!(peek.iter().all(|m| m.due_at <= SystemTime::now()));
    assert_eq!(p.peek(t, 3..10).await.unwrap().len(), 1, "paging past ready");
    let dup = p
        .send_with(t, &"d2".to_string(), SendOptions::new().id("d"))
        .await
        .unwrap();
    assert!(matches!(dup, SendOutcome::Duplicate(_)), "{dup:?}");
    let gone = p.cancel(t, &MessageId::new("e").unwrap()).await.unwrap();
    assert_eq!(gone, Cancelled::Removed);
    // Replaced: out of `ready`, back in `delayed` at its new due time.
    let replaced = p
        .send_with(
            t,
            &"c2".to_string(),
            SendOptions::new()
                .id("c")
                .replace(true)
                .delay(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert!(matches!(replaced, SendOutcome::Replaced(_)), "{replaced:?}");
    let moved = p
        .reschedule(t, &MessageId::new("a").unwrap(), Duration::from_secs(60))
        .await
        .unwrap();
    assert!(moved, "reschedule of a message in ready");
    let ready: Vec<String> = redis::cmd("ZRANGE")
        .arg(&keys.ready)
        .arg(0)
        .arg(-1)
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(ready, ["d"]);
    let delayed: Vec<String> = redis::cmd("ZRANGE")
        .arg(&keys.delayed)
        .arg(0)
        .arg(-1)
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(delayed, ["c", "a"], "replaced and rescheduled wait in delayed");
    assert_eq!(p.counts(t).await.unwrap().delayed, 3);
    rt.shutdown().await.unwrap();
}

static FAR: Mutex<Vec<(String, Instant)>> = Mutex::new(Vec::new());

#[delay_listener(topic = "flow.prio.far", concurrency = 1)]
async fn far_handler(tag: String) {
    FAR.lock().unwrap().push((tag, Instant::now()));
}

/// Due in ten minutes, the messages wait in a far bucket: their priorities come back with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_far_wait_keeps_the_priority() {
    let kit = TestRuntime::builder()
        .topics(["flow.prio.far"])
        .start()
        .await
        .unwrap();
    let t = "flow.prio.far";
    let p = kit.producer();
    p.pause(t).await.unwrap();
    for (i, (name, level)) in [
        ("low", Priority::Low),
        ("normal", Priority::Normal),
        ("high", Priority::High),
    ]
    .into_iter()
    .enumerate()
    {
        let opts = SendOptions::new()
            .priority(level)
            .delay(Duration::from_secs(600) + Duration::from_millis(i as u64));
        p.send_with(t, &name.to_string(), opts).await.unwrap();
    }
    kit.advance(Duration::from_secs(601)).await.unwrap();
    p.resume(t).await.unwrap();
    let runs = wait_runs(&FAR, 3).await;
    kit.run_until_idle_within(Duration::from_secs(5))
        .await
        .unwrap();
    let order: Vec<&str> = runs.iter().map(|(tag, _)| tag.as_str()).collect();
    assert_eq!(order, ["high", "normal", "low"]);
    kit.shutdown().await.unwrap();
}

#[delay_listener(topic = "flow.prio.none")]
async fn none_handler(_n: u32) {}

/// A topic whose messages all have the default priority claims as before: no `ready`, no mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_without_priorities_never_gets_ready() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.prio.none";
    let keys = TopicKeys::new("delayq", t).unwrap();
    let rt = crate::runtime(&server, t).await;
    for n in 0..50u32 {
        let opts = SendOptions::new().priority(Priority::Normal);
        p.send_with(t, &n, opts).await.unwrap();
    }
    p.send_batch(t, (0..50u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.counts(t).await.unwrap() != Default::default() && Instant::now() < deadline {
        sleep_ms(20).await;
    }
    assert_eq!(p.counts(t).await.unwrap(), Default::default());
    let mark: Option<String> = redis::cmd("HGET")
        .arg(&keys.farinfo)
        .arg("prio")
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(mark, None);
    assert!(!exists(&server, &keys.ready));
    rt.shutdown().await.unwrap();
}
