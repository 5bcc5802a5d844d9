//! Several runtimes, shutdown, Redis restarts and idle cost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use delayq_dev::{drained, envelope, init_tracing, producer, runtime, sleep_ms, Seen};
use delayq_dev::{Persistence, RedisServer};
use delayq_runtime::{delay_listener, Runtime};

// --- two runtimes, one topic ------------------------------------------------------------

static SHARED: Seen<u32> = Seen::new();

#[delay_listener(topic = "shared", concurrency = 50)]
async fn shared_handler(n: u32) {
    SHARED.push(n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runtimes_sharing_a_topic_handle_10000_messages_exactly_once() {
    init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let a = runtime(&server, &["shared"]).await;
    let b = runtime(&server, &["shared"]).await;
    let items = (0..10_000u32).map(|n| (n, Duration::from_millis(u64::from(n % 1000))));
    p.send_batch("shared", items).await.unwrap();
    SHARED.wait_for(10_000, Duration::from_secs(120)).await;
    drained(&p, "shared", Duration::from_secs(30)).await;
    sleep_ms(200).await;
    let mut times: HashMap<u32, usize> = HashMap::new();
    for n in SHARED.all() {
        *times.entry(n).or_default() += 1;
    }
    let twice: Vec<_> = times.iter().filter(|(_, c)| **c > 1).collect();
    assert_eq!(times.len(), 10_000);
    assert!(twice.is_empty(), "handled more than once: {twice:?}");
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

// --- graceful shutdown ------------------------------------------------------------------

static HOLD: AtomicBool = AtomicBool::new(true);
static HELD: Seen<(u32, u32)> = Seen::new();

#[delay_listener(topic = "held", concurrency = 100)]
async fn held_handler(msg: delayq_runtime::Message<u32>) {
    HELD.push((*msg.payload(), msg.attempt()));
    while HOLD.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_hands_unfinished_claims_back_at_once_for_another_runtime() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let first = Runtime::builder()
        .redis_url(server.url())
        .topics(["held"])
        .shutdown_grace(Duration::from_millis(300))
        .spawn()
        .await
        .unwrap();
    let ids = p
        .send_batch("held", (0..100u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    HELD.wait_for(100, Duration::from_secs(20)).await;
    assert_eq!(p.counts("held").await.unwrap().inflight, 100);

    let started = std::time::Instant::now();
    first.shutdown().await.unwrap();
    let took = started.elapsed();
    let counts = p.counts("held").await.unwrap();
    assert_eq!(
        (counts.delayed, counts.inflight),
        (100, 0),
        "all handed back at once"
    );
    assert!(took < Duration::from_secs(3), "shutdown took {took:?}");
    for id in &ids {
        assert_eq!(
            envelope(&server, "held", id).unwrap().attempt,
            0,
            "the attempt was given back"
        );
    }

    HOLD.store(false, Ordering::SeqCst);
    let second = runtime(&server, &["held"]).await;
    let seen = HELD.wait_for(200, Duration::from_secs(20)).await;
    drained(&p, "held", Duration::from_secs(20)).await;
    let second_runs: Vec<_> = seen[100..].iter().collect();
    assert!(
        second_runs.iter().all(|(_, attempt)| *attempt == 1),
        "{second_runs:?}"
    );
    second.shutdown().await.unwrap();
}

// --- Redis stopped and restarted mid-run ------------------------------------------------

static SURVIVOR: Seen<u32> = Seen::new();

#[delay_listener(topic = "survivor", concurrency = 20)]
async fn survivor_handler(n: u32) {
    SURVIVOR.push(n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_recovers_when_redis_is_stopped_for_5s_and_restarted() {
    init_tracing();
    let mut server = RedisServer::builder()
        .persistence(Persistence::AofAlways)
        .start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["survivor"]).await;
    let items: Vec<_> = (0..300u32)
        .map(|n| (n, Duration::from_millis(u64::from(n) * 20)))
        .collect();
    p.send_batch("survivor", items).await.unwrap();
    sleep_ms(1000).await;
    let before = SURVIVOR.len();
    server.stop();
    sleep_ms(5000).await;
    server.restart();
    SURVIVOR.wait_for(300, Duration::from_secs(60)).await;
    drained(&p, "survivor", Duration::from_secs(30)).await;
    let mut handled: Vec<u32> = SURVIVOR.all();
    handled.sort();
    handled.dedup();
    println!(
        "handled {before} before the stop, {} distinct in all",
        handled.len()
    );
    assert!(
        before > 0 && before < 300,
        "the stop landed mid-run ({before} handled before it)"
    );
    assert_eq!(handled, (0..300).collect::<Vec<_>>());
    rt.shutdown().await.unwrap();
}

// --- idle cost --------------------------------------------------------------------------

delayq_dev::idle_listeners!(
    IDLE_TOPICS:
    idle0 = "idle.0",
    idle1 = "idle.1",
    idle2 = "idle.2",
    idle3 = "idle.3",
    idle4 = "idle.4",
    idle5 = "idle.5",
    idle6 = "idle.6",
    idle7 = "idle.7",
    idle8 = "idle.8",
    idle9 = "idle.9"
);

const IDLE_WINDOW_S: u64 = 20;

#[tokio::test]
async fn ten_idle_listeners_issue_almost_no_commands() {
    let server = RedisServer::start();
    let rt = runtime(&server, IDLE_TOPICS).await;
    sleep_ms(500).await; // start-up: one claim and one sweep per topic
    server.reset_stats();
    // Longer than the subscriber's 15 s PING interval, so its keepalive is seen working.
    sleep_ms(IDLE_WINDOW_S * 1000).await;
    let calls = server.command_calls();
    let issued: u64 = calls
        .iter()
        .filter(|(name, _)| !name.starts_with("config"))
        .map(|(_, n)| n)
        .sum();
    let old_design = 2 * IDLE_TOPICS.len() as u64 * IDLE_WINDOW_S;
    println!(
        "idle: 10 listeners issued {issued} Redis commands in {IDLE_WINDOW_S} s ({:.2}/s); the old design: {old_design} ({calls:?})",
        issued as f64 / IDLE_WINDOW_S as f64
    );
    assert!(
        issued * 20 <= old_design,
        "{issued} commands is not far below {old_design}"
    );
    // The only traffic of an idle runtime is the wake-up connection's keepalive PING (one
    // every 15 s per runtime, not per topic), answered: no reconnect, no re-check of topics.
    let others: Vec<_> = calls
        .iter()
        .filter(|(name, _)| !name.starts_with("config") && name.as_str() != "ping")
        .collect();
    assert!(
        others.is_empty(),
        "idle commands other than PING: {others:?}"
    );
    assert_eq!(calls.get("ping").copied(), Some(1), "{calls:?}");
    rt.shutdown().await.unwrap();
}
