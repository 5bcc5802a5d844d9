//! Flow control (#34): retry_after (item 3), bounded dead letters (item 8), the rate limit's
//! claims (item 1; `flow/rate_processes.rs` holds it across three processes), debounce and the
//! options' checks; the stream listeners' dead-letter bounds (`flow/stream_dead_bounds.rs`);
//! and the edges an adversarial review found, each failing before its fix (`flow/*.rs`): a
//! `rate_tat` far ahead (a slower rate before, a hand edit, garbage), an old build's stats
//! cleanup beside a new one, a rate lowered from outside the code under an attribute's burst,
//! sends to a held-back topic, `retry_after(Duration::MAX)`, and the test kit's `advance` on a
//! rate-limited topic; priorities and due order after claims stopped for longer than a far
//! bucket's width, the dead-letter bound at the claim's own deaths (`flow/far_backlog.rs`),
//! and what low priorities get under a steady high stream (`flow/priority_stream.rs`). One
//! test binary: each costs CI a link.

/// A connection to `server`, which from now on keeps every command in its slow log (for the
/// tests that count claim calls).
fn log_every_command(server: &RedisServer) -> redis::Connection {
    let mut c = server.connection();
    for (k, v) in [
        ("slowlog-log-slower-than", "0"),
        ("slowlog-max-len", "100000"),
    ] {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query::<()>(&mut c)
            .unwrap();
    }
    c
}

mod rate_processes {
    include!("flow/rate_processes.rs");
}
mod per_key_processes {
    include!("flow/per_key_processes.rs");
}
mod stream_dead_bounds {
    include!("flow/stream_dead_bounds.rs");
}
mod rate_tat {
    include!("flow/rate_tat.rs");
}
mod old_build_stats {
    include!("flow/old_build_stats.rs");
}
mod rate_override {
    include!("flow/rate_override.rs");
}
mod rate_spin {
    include!("flow/rate_spin.rs");
}
mod retry_after_huge {
    include!("flow/retry_after_huge.rs");
}
mod kit_rate {
    include!("flow/kit_rate.rs");
}
mod dedup_window {
    include!("flow/dedup_window.rs");
}
mod priority {
    include!("flow/priority.rs");
}
mod far_backlog {
    include!("flow/far_backlog.rs");
}
mod priority_stream {
    include!("flow/priority_stream.rs");
}
mod dedup_edges {
    include!("flow/dedup_edges.rs");
}
mod rate_per_key {
    include!("flow/rate_per_key.rs");
}
mod priority_edges {
    include!("flow/priority_edges.rs");
}
mod rate_per_key_kit {
    include!("flow/rate_per_key_kit.rs");
}
mod rate_per_key_edges {
    include!("flow/rate_per_key_edges.rs");
}

use std::sync::Mutex;
use std::time::{Duration, Instant};

use delayq_core::protocol::{Flow, NackOutcome, TopicKeys};
use delayq_dev::{producer, sleep_ms, RedisServer, Seen};
use delayq_runtime::__private::Rate;
use delayq_runtime::{
    delay_listener, Ack, ConfigValue, Message, RetryAfter, Runtime, RuntimeHandle,
};

async fn runtime(server: &RedisServer, topic: &str) -> RuntimeHandle {
    Runtime::builder()
        .redis_url(server.url())
        .topics([topic])
        .spawn()
        .await
        .unwrap()
}

// --- retry_after: back after the delay, the attempt not counted ---------------------------

/// (payload, attempt, when) of each run.
static LATER: Mutex<Vec<(u32, u32, Instant)>> = Mutex::new(Vec::new());

/// Told "not now" twice, then acks; with max_attempts = 1 any counted retry would bury it.
#[delay_listener(topic = "flow.later", max_attempts = 1)]
async fn later(msg: Message<u32>, ack: Ack) {
    let runs = {
        let mut all = LATER.lock().unwrap();
        all.push((*msg.payload(), msg.attempt(), Instant::now()));
        all.iter().filter(|(n, _, _)| n == msg.payload()).count()
    };
    if runs <= 2 {
        ack.retry_after(Duration::from_millis(300)).await.unwrap();
    } else {
        ack.ack().await.unwrap();
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

static LATER_AUTO: Mutex<Vec<(u32, u32, Instant)>> = Mutex::new(Vec::new());

/// Payload 0 returns `RetryAfter` itself, payload 1 a boxed one (what `?` makes of it);
/// each once, then Ok.
#[delay_listener(topic = "flow.later.auto", max_attempts = 1)]
async fn later_auto(msg: Message<u32>) -> Result<(), BoxError> {
    let n = *msg.payload();
    let first = {
        let mut all = LATER_AUTO.lock().unwrap();
        all.push((n, msg.attempt(), Instant::now()));
        all.iter().filter(|(m, _, _)| *m == n).count() == 1
    };
    if first {
        if n == 0 {
            return Err(Box::new(RetryAfter(Duration::from_millis(300))));
        }
        Err(RetryAfter(Duration::from_millis(300)))?;
    }
    Ok(())
}

async fn wait_runs(runs: &Mutex<Vec<(u32, u32, Instant)>>, n: usize) -> Vec<(u32, u32, Instant)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let all = runs.lock().unwrap().clone();
        if all.len() >= n {
            return all;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} runs: {all:?}",
            all.len()
        );
        sleep_ms(20).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_brings_a_message_back_later_without_using_an_attempt() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, "flow.later").await;
    p.send("flow.later", &7u32, Duration::ZERO).await.unwrap();
    let runs = wait_runs(&LATER, 3).await;
    let attempts: Vec<u32> = runs.iter().map(|r| r.1).collect();
    assert_eq!(attempts, [1, 1, 1], "retry_after used an attempt: {runs:?}");
    for pair in runs.windows(2) {
        let gap = pair[1].2 - pair[0].2;
        assert!(
            gap >= Duration::from_millis(290),
            "back after {gap:?}, not 300 ms"
        );
    }
    sleep_ms(200).await;
    let c = p.counts("flow.later").await.unwrap();
    assert_eq!((c.delayed, c.inflight, c.dead), (0, 0, 0), "{c:?}");
    rt.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_ack_handler_returning_retry_after_comes_back_without_using_an_attempt() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, "flow.later.auto").await;
    p.send("flow.later.auto", &0u32, Duration::ZERO)
        .await
        .unwrap();
    p.send("flow.later.auto", &1u32, Duration::ZERO)
        .await
        .unwrap();
    let runs = wait_runs(&LATER_AUTO, 4).await;
    for n in [0, 1] {
        let mine: Vec<_> = runs.iter().filter(|r| r.0 == n).collect();
        assert_eq!(mine.len(), 2, "payload {n}: {runs:?}");
        assert!(
            mine.iter().all(|r| r.1 == 1),
            "an attempt was used: {mine:?}"
        );
        let gap = mine[1].2 - mine[0].2;
        assert!(
            gap >= Duration::from_millis(290),
            "payload {n} back after {gap:?}"
        );
    }
    sleep_ms(200).await;
    let c = p.counts("flow.later.auto").await.unwrap();
    assert_eq!((c.delayed, c.inflight, c.dead), (0, 0, 0), "{c:?}");
    rt.shutdown().await.unwrap();
}

// --- bounded dead letters -------------------------------------------------------------------

static BURIED: Seen<u32> = Seen::new();

#[delay_listener(topic = "flow.dead", dead_max = 5, concurrency = 1)]
async fn always_dead(msg: Message<u32>, ack: Ack) {
    ack.dead_letter("no").await.unwrap();
    BURIED.push(*msg.payload());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_past_dead_max_are_dropped_oldest_first() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, "flow.dead").await;
    for n in 0..12u32 {
        // One at a time, so the order they die in is their order.
        p.send("flow.dead", &n, Duration::ZERO).await.unwrap();
        BURIED
            .wait_for(n as usize + 1, Duration::from_secs(10))
            .await;
    }
    let dead = p.dead_letters("flow.dead", 0..100).await.unwrap();
    let mut kept: Vec<u32> = dead
        .iter()
        .map(|d| serde_json::from_slice(&d.payload).unwrap())
        .collect();
    kept.sort_unstable();
    assert_eq!(kept, [7, 8, 9, 10, 11], "the newest five stay");
    let stats = p.topic_stats("flow.dead").await.unwrap();
    assert_eq!((stats.dead, stats.dead_dropped), (5, 7), "{stats:?}");
    // The dropped letters' envelopes are gone too.
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let keys = TopicKeys::new("delayq", "flow.dead").unwrap();
    let envelopes: usize = redis::cmd("HLEN")
        .arg(&keys.msg)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(envelopes, 5);
    rt.shutdown().await.unwrap();
}

/// The protocol itself: dead_ttl drops expired letters at the next settle or sweep (the back
/// pool's `requeue_expired`, at least every two minutes), with no new death needed.
#[tokio::test]
async fn expired_dead_letters_go_at_the_next_sweep() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "flow.ttl")
        .unwrap()
        .with_flow(Flow {
            dead_ttl_ms: 1_000,
            ..Flow::default()
        });
    for n in 0..3u32 {
        p.send("flow.ttl", &n, Duration::ZERO).await.unwrap();
    }
    for c in q
        .claim_due(10, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed
    {
        let out = q
            .nack(&c.id, c.token(), Duration::ZERO, "", 16, Some("test"))
            .await;
        assert_eq!(out.unwrap(), NackOutcome::Dead);
    }
    assert_eq!(q.take_dead_dropped(), 0);
    assert_eq!(p.counts("flow.ttl").await.unwrap().dead, 3);
    sleep_ms(1_100).await;
    let report = q.requeue_expired(100, 16).await.unwrap();
    assert_eq!(report.dead_dropped, 3);
    assert_eq!(q.take_dead_dropped(), 3);
    let stats = p.topic_stats("flow.ttl").await.unwrap();
    assert_eq!((stats.dead, stats.dead_dropped), (0, 3), "{stats:?}");
}

// --- the rate limit where messages are claimed ----------------------------------------------

#[tokio::test]
async fn a_rate_limited_claim_takes_the_burst_then_says_when_the_next_may_go() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rate = Rate::parse("10/s").unwrap().with_burst(5).unwrap();
    let q = delayq_core::protocol::queue(&p, "flow.rate")
        .unwrap()
        .with_flow(Flow {
            rate: Some(rate),
            ..Flow::default()
        });
    p.send_batch("flow.rate", (0..100u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    let first = q.claim_due(50, Duration::from_secs(30)).await.unwrap();
    assert_eq!(first.claimed.len(), 5, "the burst");
    let next = first.next_due_ms.expect("more are due");
    let wait = next.saturating_sub(first.now_ms);
    assert!(
        (90..=101).contains(&wait),
        "the next may go 100 ms later, not {wait} ms"
    );
    let second = q.claim_due(50, Duration::from_secs(30)).await.unwrap();
    assert!(second.claimed.is_empty(), "claimed past the limit");
    assert_eq!(second.next_due_ms, Some(next));
    // Every claim takes what the time since allows: 10 in the next second.
    let started = Instant::now();
    let mut got = 0;
    while started.elapsed() < Duration::from_millis(1_000) {
        got += q
            .claim_due(50, Duration::from_secs(30))
            .await
            .unwrap()
            .claimed
            .len();
        sleep_ms(10).await;
    }
    assert!((9..=11).contains(&got), "{got} claimed in 1 s at 10/s");
    // A topic claimed with no limit takes all that is due.
    let free = delayq_core::protocol::queue(&p, "flow.rate").unwrap();
    assert_eq!(
        free.claim_due(200, Duration::from_secs(30))
            .await
            .unwrap()
            .claimed
            .len(),
        100 - 5 - got
    );
}

// --- the options' checks --------------------------------------------------------------------

#[delay_listener(topic = "flow.opts")]
async fn opts(_: u32) {}

#[tokio::test]
async fn a_burst_without_a_rate_or_above_it_is_refused_and_a_configured_rate_is_shown() {
    let server = RedisServer::start();
    let spawn = |sets: Vec<(&str, ConfigValue)>| {
        let mut b = Runtime::builder()
            .redis_url(server.url())
            .topics(["flow.opts"]);
        for (k, v) in sets {
            b = b.set(&format!("listeners.\"flow.opts\".{k}"), v);
        }
        b.spawn()
    };
    let err = spawn(vec![("burst", 5.into())]).await.unwrap_err();
    assert!(err.to_string().contains("a burst needs a rate"), "{err}");
    let err = spawn(vec![("rate", "10/s".into()), ("burst", 11.into())])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("from 1 to the rate's 10"), "{err}");
    let err = spawn(vec![("rate", "10/d".into())]).await.unwrap_err();
    assert!(err.to_string().contains("N/s, N/m or N/h"), "{err}");
    let err = spawn(vec![("dead_ttl", "10ms".into())]).await.unwrap_err();
    assert!(err.to_string().contains("too short"), "{err}");
    let rt = spawn(vec![("rate", "5/m".into()), ("dead_max", 3.into())])
        .await
        .unwrap();
    let shown = format!("{:?}", rt.config());
    assert!(
        shown.contains("5/m") && shown.contains("dead_max"),
        "{shown}"
    );
    rt.shutdown().await.unwrap();
}

// --- debounce: the last of a burst of sends wins ----------------------------------------------

static DEBOUNCED: Mutex<Vec<(u32, Instant)>> = Mutex::new(Vec::new());

#[delay_listener(topic = "flow.debounce")]
async fn debounced(n: u32) {
    DEBOUNCED.lock().unwrap().push((n, Instant::now()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debounced_burst_runs_once_with_the_last_payload_a_window_after_the_last_send() {
    use delayq_core::{SendOptions, SendOutcome};
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, "flow.debounce").await;
    let window = Duration::from_millis(300);
    let mut outcomes = Vec::new();
    let mut last_send = Instant::now();
    for n in 0..5u32 {
        let opts = SendOptions::new().id("doc-7").debounce(window);
        outcomes.push(p.send_with("flow.debounce", &n, opts).await.unwrap());
        last_send = Instant::now();
        sleep_ms(100).await;
    }
    assert!(
        matches!(outcomes[0], SendOutcome::Created(_)),
        "{outcomes:?}"
    );
    assert!(
        outcomes[1..]
            .iter()
            .all(|o| matches!(o, SendOutcome::Replaced(_))),
        "{outcomes:?}"
    );
    sleep_ms(700).await;
    let runs = DEBOUNCED.lock().unwrap().clone();
    assert_eq!(runs.len(), 1, "one run for the burst: {runs:?}");
    assert_eq!(runs[0].0, 4, "the last payload wins");
    let after = runs[0].1 - last_send;
    assert!(
        after >= Duration::from_millis(290),
        "ran {after:?} after the last send, before the window"
    );
    // A later replace(false) does not undo the debounce.
    let opts = SendOptions::new().id("doc-8").debounce(window);
    p.send_with("flow.debounce", &5u32, opts.clone())
        .await
        .unwrap();
    let again = p
        .send_with("flow.debounce", &6u32, opts.replace(false))
        .await
        .unwrap();
    assert!(matches!(again, SendOutcome::Replaced(_)), "{again:?}");
    let err = p
        .send_with("flow.debounce", &9u32, SendOptions::new().debounce(window))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("needs an id"), "{err}");
    rt.shutdown().await.unwrap();
}
