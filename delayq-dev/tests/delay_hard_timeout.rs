//! `timeout`: a handler run past its hard limit is stopped (its future dropped), fails like an
//! `Err` ("timed out after …"), is retried and dead-lettered, and frees its slot at once; a
//! stream listener's too; and `delayq.toml`/the builder can set it like any other option.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use delayq_dev::{producer, sleep_ms, RedisServer};
use delayq_runtime::{delay_listener, Runtime};

static HUNG_STARTS: AtomicUsize = AtomicUsize::new(0);
static HUNG_DROPPED: AtomicUsize = AtomicUsize::new(0);
static QUICK_DONE: AtomicUsize = AtomicUsize::new(0);

/// Counts the hung runs whose future was dropped (the handler stopped, not left running).
struct OnDrop;
impl Drop for OnDrop {
    fn drop(&mut self) {
        HUNG_DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

/// One slot: a hung run that kept it would keep every later message waiting.
#[delay_listener(
    topic = "timeout.one",
    concurrency = 1,
    max_attempts = 2,
    backoff = "fixed(100ms)",
    timeout = "300ms"
)]
async fn one_slot(msg: String) -> Result<(), String> {
    if msg == "hang" {
        HUNG_STARTS.fetch_add(1, Ordering::SeqCst);
        let _guard = OnDrop;
        std::future::pending::<()>().await;
    }
    QUICK_DONE.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_handler_is_stopped_at_its_timeout_retried_dead_lettered_and_frees_its_slot() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["timeout.one"])
        .prometheus(metrics)
        .spawn()
        .await
        .unwrap();
    p.send("timeout.one", &"hang".to_string(), Duration::ZERO)
        .await
        .unwrap();
    sleep_ms(50).await;
    let started = Instant::now();
    for _ in 0..3 {
        p.send("timeout.one", &"quick".to_string(), Duration::ZERO)
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while QUICK_DONE.load(Ordering::SeqCst) < 3 {
        assert!(
            Instant::now() < deadline,
            "the quick messages never ran: the hung run kept the only slot"
        );
        sleep_ms(10).await;
    }
    println!(
        "3 quick messages behind a hung run done in {:?}",
        started.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.counts("timeout.one").await.unwrap().dead < 1 {
        assert!(
            Instant::now() < deadline,
            "the hung message was never dead-lettered"
        );
        sleep_ms(20).await;
    }
    let dead = p.dead_letters("timeout.one", 0..10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attempts, 2, "each timed-out run is an attempt");
    assert_eq!(
        dead[0].last_error.as_deref(),
        Some("timed out after 300ms"),
        "the reason says it timed out, in a duration delayq reads"
    );
    assert_eq!(HUNG_STARTS.load(Ordering::SeqCst), 2);
    let scrape = ureq::get(&format!("http://{metrics}/metrics"))
        .call()
        .expect("scrape /metrics")
        .into_body()
        .read_to_string()
        .unwrap();
    assert!(
        scrape
            .lines()
            .any(|l| l.starts_with("delayq_timeouts_total{topic=\"timeout.one\"} 2")),
        "{scrape}"
    );
    assert_eq!(
        HUNG_DROPPED.load(Ordering::SeqCst),
        2,
        "each hung run's future was dropped"
    );
    // `delayq stats` (and the dashboard) count them in Redis: one retried, one dead, both
    // timed out; the quick ones' plain outcomes are not.
    let handled = p.topic_stats("timeout.one").await.unwrap().last_minute;
    assert_eq!(
        (handled.ok, handled.retry, handled.dead, handled.timed_out),
        (3, 1, 1, 2)
    );
    rt.shutdown().await.unwrap();
}

static SLOW_DONE: AtomicUsize = AtomicUsize::new(0);

/// No timeout in the attribute: the builder's `set` gives one (as delayq.toml or a variable would).
#[delay_listener(topic = "timeout.set", max_attempts = 1)]
async fn slow(ms: u64) -> Result<(), String> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    SLOW_DONE.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_set_outside_the_attribute_applies_and_shows_in_the_config_view() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["timeout.set"])
        .set("listeners.\"timeout.set\".timeout", "200ms")
        .spawn()
        .await
        .unwrap();
    let listener = rt.config().listener("timeout.set").unwrap().clone();
    let timeout = listener.get("timeout").unwrap();
    assert_eq!(
        (timeout.value.as_str(), &timeout.source),
        ("200ms", &delayq_runtime::ConfigSource::Builder)
    );
    p.send("timeout.set", &5_000u64, Duration::ZERO)
        .await
        .unwrap();
    p.send("timeout.set", &10u64, Duration::ZERO).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.counts("timeout.set").await.unwrap().dead < 1 {
        assert!(
            Instant::now() < deadline,
            "the 5 s run was not stopped at 200ms"
        );
        sleep_ms(20).await;
    }
    let dead = p.dead_letters("timeout.set", 0..10).await.unwrap();
    assert_eq!(dead[0].last_error.as_deref(), Some("timed out after 200ms"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while SLOW_DONE.load(Ordering::SeqCst) < 1 {
        assert!(
            Instant::now() < deadline,
            "a run under the limit did not finish"
        );
        sleep_ms(10).await;
    }
    rt.shutdown().await.unwrap();
}

static STREAM_QUICK: AtomicUsize = AtomicUsize::new(0);

/// A stream listener's run has the same hard limit.
#[delayq_runtime::stream_listener(
    stream = "timeout.stream",
    group = "g",
    start = "0",
    concurrency = 1,
    max_deliveries = 1,
    timeout = "200ms"
)]
async fn stream_slot(msg: String) -> Result<(), String> {
    if msg == "hang" {
        std::future::pending::<()>().await;
    }
    STREAM_QUICK.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_stream_handler_is_stopped_at_its_timeout_and_dead_lettered() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.publish("timeout.stream", &"hang".to_string())
        .await
        .unwrap();
    p.publish("timeout.stream", &"quick".to_string())
        .await
        .unwrap();
    let rt = delayq_dev::stream_runtime(&server, &["timeout.stream"]).await;
    let dead =
        delayq_dev::stream_dead_letters(&p, "timeout.stream", "g", 1, Duration::from_secs(10))
            .await;
    println!("{dead:?}");
    assert_eq!(dead.len(), 1);
    assert!(
        format!("{dead:?}").contains("timed out after 200ms"),
        "{dead:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while STREAM_QUICK.load(Ordering::SeqCst) < 1 {
        assert!(
            Instant::now() < deadline,
            "the entry behind the hung one never ran"
        );
        sleep_ms(10).await;
    }
    rt.shutdown().await.unwrap();
}

/// Panics when dropped: a handler's destructor that panics when the run is stopped.
struct PanicsOnDrop;
impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("dropped before commit");
    }
}

/// A long ack deadline: only the timeout's own retry path can make this a dead letter soon.
#[delay_listener(
    topic = "timeout.bomb",
    max_attempts = 1,
    ack_timeout = "30s",
    timeout = "200ms"
)]
async fn bomb(_: u32) -> Result<(), String> {
    let _bomb = PanicsOnDrop;
    std::future::pending::<()>().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destructor_that_panics_when_a_run_is_stopped_does_not_lose_the_failure() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["timeout.bomb"])
        .spawn()
        .await
        .unwrap();
    p.send("timeout.bomb", &1u32, Duration::ZERO).await.unwrap();
    // Far below the 30 s ack deadline, after which the back pool would bury it anyway.
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.counts("timeout.bomb").await.unwrap().dead < 1 {
        assert!(
            Instant::now() < deadline,
            "the stopped run's failure was lost with its panicking destructor"
        );
        sleep_ms(20).await;
    }
    let dead = p.dead_letters("timeout.bomb", 0..10).await.unwrap();
    assert_eq!(dead[0].last_error.as_deref(), Some("timed out after 200ms"));
    rt.shutdown().await.unwrap();
}

static FROZEN_STOPPED: AtomicUsize = AtomicUsize::new(0);

struct CountsDrop;
impl Drop for CountsDrop {
    fn drop(&mut self) {
        FROZEN_STOPPED.fetch_add(1, Ordering::SeqCst);
    }
}

/// Renewed every 100 ms: on a frozen Redis a renewal hangs, and must not hold the run past 1 s.
#[delay_listener(
    topic = "timeout.frozen",
    concurrency = 1,
    max_attempts = 1,
    ack_timeout = "300ms",
    timeout = "1s"
)]
async fn frozen(_: u32) -> Result<(), String> {
    let _counts = CountsDrop;
    std::future::pending::<()>().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_stopped_at_its_timeout_while_a_renewal_hangs_on_a_frozen_redis() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["timeout.frozen"])
        .spawn()
        .await
        .unwrap();
    p.send("timeout.frozen", &1u32, Duration::ZERO)
        .await
        .unwrap();
    sleep_ms(500).await;
    server.freeze();
    // The limit passes 0.5 s into the freeze; a renewal is in flight by then.
    sleep_ms(1_500).await;
    let stopped = FROZEN_STOPPED.load(Ordering::SeqCst);
    server.thaw();
    assert_eq!(
        stopped, 1,
        "the run was held past its limit by a hanging renewal"
    );
    rt.shutdown().await.unwrap();
}

static ACKED_THEN_HUNG: AtomicUsize = AtomicUsize::new(0);

/// Acks, then hangs: stopped at the limit, but its message is done, not failed.
#[delay_listener(topic = "timeout.acked", timeout = "200ms")]
async fn acked_then_hung(_: u32, ack: delayq_runtime::Ack) {
    ack.ack().await.unwrap();
    ACKED_THEN_HUNG.fetch_add(1, Ordering::SeqCst);
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_acked_then_hung_is_stopped_without_failing_its_message() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["timeout.acked"])
        .spawn()
        .await
        .unwrap();
    p.send("timeout.acked", &1u32, Duration::ZERO)
        .await
        .unwrap();
    sleep_ms(1_000).await;
    let counts = p.counts("timeout.acked").await.unwrap();
    assert_eq!(
        (counts.delayed, counts.inflight, counts.dead),
        (0, 0, 0),
        "{counts:?}"
    );
    assert_eq!(
        ACKED_THEN_HUNG.load(Ordering::SeqCst),
        1,
        "run once, not retried"
    );
    rt.shutdown().await.unwrap();
}
