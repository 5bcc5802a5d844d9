//! The runtime end to end on each Redis deployment: a single server, a Redis Cluster
//! (3 primaries, a replica each) and Sentinel (a primary, a replica, 3 sentinels). One suite,
//! run once per deployment: each test's name carries `single`, `cluster` or `sentinel`.
//!
//! The three runs of a test share its listener, so every payload carries the deployment's
//! name and each run counts only its own.

use std::time::Duration;

use delayq_dev::{drained, sleep_ms, Seen, TestRedis};
use delayq_runtime::{
    delay_listener, Ack, Cancelled, Message, Priority, Producer, Runtime, RuntimeHandle,
    SendOptions, SendOutcome,
};
use serde::{Deserialize, Serialize};

const WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Job {
    on: String,
    n: u32,
}

async fn runtime(redis: &TestRedis, topics: &[&str]) -> RuntimeHandle {
    Runtime::builder()
        .redis_url(redis.url())
        .topics(topics.iter().copied())
        .shutdown_grace(Duration::from_secs(5))
        .spawn()
        .await
        .expect("spawn the runtime")
}

async fn producer(redis: &TestRedis) -> Producer {
    Producer::connect(&redis.url())
        .await
        .expect("connect a producer")
}

delayq_dev::on_each_deployment!(
    auto_ack,
    manual_ack,
    retry_then_dead,
    cancel,
    graceful_stop,
    idle,
    far_buckets,
    flow_control,
    results,
    workflow
);

// --- auto ack ---------------------------------------------------------------------------

static AUTO: Seen<(String, u32, u32)> = Seen::new();

#[delay_listener(topic = "dep.auto")]
async fn on_auto(msg: Message<Job>) {
    let job = msg.payload().clone();
    AUTO.push((job.on, job.n, msg.attempt()));
}

async fn auto_ack(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = producer(&redis).await;
    let rt = runtime(&redis, &["dep.auto"]).await;
    for n in 0..20 {
        let job = Job { on: kind.into(), n };
        p.send("dep.auto", &job, Duration::from_millis(50 * n as u64))
            .await
            .unwrap();
    }
    let mine = AUTO.wait_matching(20, WAIT, |e| e.0 == kind).await;
    let mut ns: Vec<u32> = mine.iter().map(|e| e.1).collect();
    ns.sort();
    assert_eq!(ns, (0..20).collect::<Vec<_>>(), "each exactly once");
    assert!(mine.iter().all(|e| e.2 == 1), "first attempt: {mine:?}");
    assert_eq!(drained(&p, "dep.auto", WAIT).await.dead, 0);
    rt.shutdown().await.unwrap();
}

// --- manual ack -------------------------------------------------------------------------

static MANUAL: Seen<(String, u32)> = Seen::new();

#[delay_listener(topic = "dep.manual", ack_timeout = "2s")]
async fn on_manual(msg: Job, ack: Ack) {
    ack.ack().await.expect("ack");
    MANUAL.push((msg.on, msg.n));
}

async fn manual_ack(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = producer(&redis).await;
    let rt = runtime(&redis, &["dep.manual"]).await;
    for n in 0..10 {
        p.send("dep.manual", &Job { on: kind.into(), n }, Duration::ZERO)
            .await
            .unwrap();
    }
    MANUAL.wait_matching(10, WAIT, |e| e.0 == kind).await;
    assert_eq!(drained(&p, "dep.manual", WAIT).await.dead, 0);
    sleep_ms(2_500).await; // past the ack timeout: nothing comes back
    assert_eq!(MANUAL.all().iter().filter(|e| e.0 == kind).count(), 10);
    rt.shutdown().await.unwrap();
}

// --- retry, then dead -------------------------------------------------------------------

static FAILING: Seen<(String, u32)> = Seen::new();

#[delay_listener(topic = "dep.failing", max_attempts = 3, backoff = "fixed(50ms)")]
async fn always_fails(msg: Message<Job>) -> Result<(), String> {
    FAILING.push((msg.payload().on.clone(), msg.attempt()));
    Err(format!("attempt {} failed", msg.attempt()))
}

async fn retry_then_dead(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = producer(&redis).await;
    let rt = runtime(&redis, &["dep.failing"]).await;
    p.send(
        "dep.failing",
        &Job {
            on: kind.into(),
            n: 1,
        },
        Duration::ZERO,
    )
    .await
    .unwrap();
    let runs = FAILING.wait_matching(3, WAIT, |e| e.0 == kind).await;
    let attempts: Vec<u32> = runs.iter().map(|e| e.1).collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert_eq!(drained(&p, "dep.failing", WAIT).await.dead, 1);
    let dead = p.dead_letters("dep.failing", 0..10).await.unwrap();
    assert_eq!(dead[0].attempts, 3);
    assert_eq!(dead[0].last_error.as_deref(), Some("attempt 3 failed"));
    rt.shutdown().await.unwrap();
}

// --- cancel -----------------------------------------------------------------------------

static CANCELLED: Seen<String> = Seen::new();

#[delay_listener(topic = "dep.cancel")]
async fn on_cancel_topic(msg: Job) {
    CANCELLED.push(msg.on);
}

async fn cancel(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = producer(&redis).await;
    let rt = runtime(&redis, &["dep.cancel"]).await;
    let job = Job {
        on: kind.into(),
        n: 1,
    };
    let id = p
        .send("dep.cancel", &job, Duration::from_millis(500))
        .await
        .unwrap();
    assert_eq!(
        p.cancel("dep.cancel", &id).await.unwrap(),
        Cancelled::Removed
    );
    sleep_ms(1_000).await;
    assert!(
        !CANCELLED.all().iter().any(|on| on == kind),
        "a cancelled message ran"
    );
    assert_eq!(p.counts("dep.cancel").await.unwrap().delayed, 0);
    rt.shutdown().await.unwrap();
}

// --- graceful stop ----------------------------------------------------------------------

static STOPPING: Seen<(String, u32)> = Seen::new();

#[delay_listener(topic = "dep.stop")]
async fn slow_job(msg: Job) {
    sleep_ms(1_000).await;
    STOPPING.push((msg.on, msg.n));
}

async fn graceful_stop(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = producer(&redis).await;
    let rt = runtime(&redis, &["dep.stop"]).await;
    for n in 0..5 {
        p.send("dep.stop", &Job { on: kind.into(), n }, Duration::ZERO)
            .await
            .unwrap();
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    while p.counts("dep.stop").await.unwrap().inflight < 5 {
        assert!(tokio::time::Instant::now() < deadline, "never claimed");
        sleep_ms(10).await;
    }
    // The handlers are mid-run: the stop lets them finish and ack.
    rt.shutdown().await.unwrap();
    assert_eq!(STOPPING.all().iter().filter(|e| e.0 == kind).count(), 5);
    let c = p.counts("dep.stop").await.unwrap();
    assert_eq!((c.delayed, c.inflight, c.dead), (0, 0, 0));
}

// --- idle -------------------------------------------------------------------------------

delayq_dev::idle_listeners!(
    IDLE_TOPICS:
    idle0 = "dep.idle.0",
    idle1 = "dep.idle.1",
    idle2 = "dep.idle.2",
    idle3 = "dep.idle.3",
    idle4 = "dep.idle.4"
);

/// What Redis' own processes send each other: replicas to their primary, sentinels to the
/// data nodes (PING, INFO, and PUBLISH of their hello messages).
const INFRASTRUCTURE: &[&str] = &["replconf", "ping", "info", "publish"];

/// Idle listeners cost no commands but the wake-up connection's keepalive PING (one every
/// 15 s per runtime): no script call, no reconnect, no re-subscription. On a cluster or
/// Sentinel, Redis' own replication and monitoring traffic runs beside it and is left out.
async fn idle(kind: &str) {
    let redis = TestRedis::start(kind);
    let rt = runtime(&redis, IDLE_TOPICS).await;
    sleep_ms(1_000).await; // start-up: one claim and one sweep per topic
    redis.reset_stats();
    sleep_ms(20_000).await;
    let calls = redis.command_calls();
    println!("{kind}: idle for 20 s: {calls:?}");
    let ours: Vec<_> = calls
        .iter()
        .filter(|(name, n)| {
            **n > 0 && !name.starts_with("config") && !INFRASTRUCTURE.contains(&name.as_str())
        })
        .collect();
    assert!(ours.is_empty(), "{kind}: idle commands: {ours:?}");
    if kind == "single" {
        // Nothing else talks to a single server: its PINGs are the keepalive's.
        assert!(calls.get("ping").copied().unwrap_or(0) <= 1, "{calls:?}");
    }
    // Still listening: a message sent now wakes its sleeping boss (PUBLISH, or SPUBLISH to
    // the topic's shard); without the wake-up it would wait for the 5-minute safety check.
    let p = producer(&redis).await;
    let sent = tokio::time::Instant::now();
    p.send("dep.idle.3", &1u32, Duration::ZERO).await.unwrap();
    while p.counts("dep.idle.3").await.unwrap() != Default::default() {
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "{kind}: the wake-up did not arrive"
        );
        sleep_ms(10).await;
    }
    println!(
        "{kind}: a message to an idle topic was handled {:?} after the send",
        sent.elapsed()
    );
    rt.shutdown().await.unwrap();
}

// --- far buckets ------------------------------------------------------------------------

static FAR: Seen<(String, u32, u64, u64)> = Seen::new();

#[delay_listener(topic = "dep.far")]
async fn on_far(msg: Message<Job>) {
    let ms = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
    };
    let started = ms(std::time::SystemTime::now());
    let job = msg.payload().clone();
    FAR.push((job.on, job.n, ms(msg.due_at()), started));
}

/// Messages due beyond the next bucket wait in far bucket keys, found and promoted through
/// the topic's hash tag on every deployment (1-second buckets here; the default is a minute).
async fn far_buckets(kind: &str) {
    let redis = TestRedis::start(kind);
    let _: () = redis.query(
        redis::cmd("HSET")
            .arg("delayq:{dep.far}:farinfo")
            .arg("width")
            .arg(1000),
    );
    let p = producer(&redis).await;
    let rt = runtime(&redis, &["dep.far"]).await;
    let mut ids = Vec::new();
    for n in 0..20 {
        let job = Job { on: kind.into(), n };
        let delay = Duration::from_millis(2_500 + 100 * u64::from(n));
        ids.push(p.send("dep.far", &job, delay).await.unwrap());
    }
    let user = delayq_runtime::SendOptions::new()
        .id("far-user-id")
        .delay(Duration::from_secs(3));
    p.send_with(
        "dep.far",
        &Job {
            on: kind.into(),
            n: 99,
        },
        user,
    )
    .await
    .unwrap();
    let far: Option<u64> = redis.query(
        redis::cmd("HGET")
            .arg("delayq:{dep.far}:farinfo")
            .arg("count"),
    );
    assert_eq!(far, Some(21), "all wait in far buckets");
    assert_eq!(
        p.cancel("dep.far", &ids[0]).await.unwrap(),
        Cancelled::Removed
    );
    let user_id = "far-user-id".parse().unwrap();
    assert_eq!(
        p.cancel("dep.far", &user_id).await.unwrap(),
        Cancelled::Removed
    );
    let mine = || {
        FAR.all()
            .into_iter()
            .filter(|f| f.0 == kind)
            .collect::<Vec<_>>()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    while mine().len() < 19 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of 19 handled",
            mine().len()
        );
        sleep_ms(20).await;
    }
    sleep_ms(300).await;
    let seen = mine();
    assert_eq!(seen.len(), 19, "the 19 not cancelled, once each: {seen:?}");
    assert!(seen
        .iter()
        .all(|(_, n, due, started)| *n != 0 && *n != 99 && started >= due));
    assert_eq!(p.counts("dep.far").await.unwrap().delayed, 0);
    rt.shutdown().await.unwrap();
}

// --- flow control: priorities, a rate per key, a dedup window (the topic's new keys, declared
// on a cluster) -----------------------------------------------------------------------------

static FLOW: Seen<(String, u32, std::time::Instant)> = Seen::new();

#[delay_listener(topic = "dep.flow", concurrency = 1, rate_per_key = "20/s")]
async fn on_flow(msg: Message<Job>) {
    let job = msg.payload().clone();
    FLOW.push((job.on, job.n, std::time::Instant::now()));
}

async fn flow_control(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = producer(&redis).await;
    let t = "dep.flow";
    let job = |n: u32| Job { on: kind.into(), n };
    p.pause(t).await.unwrap();
    // Each its own key: low 0..3, then high 10..13, then one with a dedup window (20).
    for (n, level) in [(0, Priority::Low), (1, Priority::Low), (2, Priority::Low)]
        .into_iter()
        .chain([
            (10, Priority::High),
            (11, Priority::High),
            (12, Priority::High),
        ])
    {
        let opts = SendOptions::new().priority(level).key(format!("k-{n}"));
        p.send_with(t, &job(n), opts).await.unwrap();
        sleep_ms(3).await; // due times a few ms apart: within a level, due order is run order
    }
    let once = SendOptions::new()
        .id("dep-once")
        .dedup_for(Duration::from_secs(60));
    p.send_with(t, &job(20), once.clone()).await.unwrap();
    let rt = runtime(&redis, &[t]).await;
    p.resume(t).await.unwrap();
    let mine = || {
        FLOW.all()
            .into_iter()
            .filter(|f| f.0 == kind)
            .collect::<Vec<_>>()
    };
    let wait_for = |n: usize| async move {
        let deadline = tokio::time::Instant::now() + WAIT;
        while mine().len() < n {
            assert!(tokio::time::Instant::now() < deadline, "{:?}", mine());
            sleep_ms(20).await;
        }
    };
    wait_for(7).await;
    sleep_ms(100).await;
    let order: Vec<u32> = mine().iter().map(|r| r.1).collect();
    assert_eq!(order, [10, 11, 12, 20, 0, 1, 2], "by priority, then due");
    let again = p.send_with(t, &job(20), once).await.unwrap();
    assert!(matches!(again, SendOutcome::Duplicate(_)), "{again:?}");
    // One key at 20/s (burst 2, what 100 ms allows): four of its messages start at 0, 0, 50
    // and 100 ms.
    for n in 30..34u32 {
        let opts = SendOptions::new().key("same");
        p.send_with(t, &job(n), opts).await.unwrap();
    }
    wait_for(11).await;
    let runs = mine();
    let gap = runs[10].2 - runs[7].2;
    assert!(
        gap >= Duration::from_millis(90),
        "one key at 20/s: four starts within {gap:?}"
    );
    rt.shutdown().await.unwrap();
}

// --- results and waits ------------------------------------------------------------------

#[delay_listener(topic = "dep.results")]
async fn doubles(job: Job) -> Result<Job, String> {
    Ok(Job {
        on: job.on,
        n: job.n * 2,
    })
}

/// A handler's value comes back through send_and_wait and wait, ends announced on the topic's
/// own shard (a sharded subscription on a cluster), and a cancel ends a wait.
async fn results(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = producer(&redis).await;
    let rt = runtime(&redis, &["dep.results"]).await;
    let job = |n| Job { on: kind.into(), n };
    let back: Job = p
        .send_and_wait("dep.results", &job(21), WAIT)
        .await
        .unwrap();
    assert_eq!(back, job(42));
    let id = p
        .send("dep.results", &job(5), Duration::from_millis(300))
        .await
        .unwrap();
    let done: delayq_runtime::Outcome<Job> = p.wait("dep.results", &id, WAIT).await.unwrap();
    assert_eq!(done, delayq_runtime::Outcome::Done(job(10)));
    assert_eq!(p.result::<Job>("dep.results", &id).await.unwrap(), done);
    let id = p
        .send("dep.results", &job(1), Duration::from_secs(3600))
        .await
        .unwrap();
    let (waited, _) = tokio::join!(p.wait::<Job>("dep.results", &id, WAIT), async {
        sleep_ms(300).await;
        p.cancel("dep.results", &id).await.unwrap()
    });
    assert_eq!(waited.unwrap(), delayq_runtime::Outcome::Cancelled);
    rt.shutdown().await.unwrap();
}

// --- workflows --------------------------------------------------------------------------

#[delay_listener(topic = "dep.flow.a")]
async fn flow_a(job: Job) -> Result<u32, String> {
    Ok(job.n)
}

#[delay_listener(topic = "dep.flow.b", max_attempts = 1)]
async fn flow_b(job: Job) -> Result<u32, String> {
    if job.n == 0 {
        return Err("zero".into());
    }
    Ok(job.n)
}

/// A flow over two topics (two slots on a cluster, the flow in a third): a diamond runs to
/// its end; a failed step fails the flow at once; a retry runs it again.
async fn workflow(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = producer(&redis).await;
    let rt = runtime(&redis, &["dep.flow.a", "dep.flow.b"]).await;
    let job = |n| Job { on: kind.into(), n };
    let flow = delayq_runtime::Flow::new()
        .step("first", "dep.flow.a", &job(1))
        .step("left", "dep.flow.b", &job(2))
        .after(["first"])
        .step("right", "dep.flow.a", &job(3))
        .after(["first"])
        .step("last", "dep.flow.b", &job(4))
        .after(["left", "right"]);
    let id = p.start_flow(flow).await.unwrap();
    assert_eq!(
        p.wait_flow(&id, WAIT).await.unwrap(),
        Some(delayq_runtime::FlowState::Done)
    );
    let failing = delayq_runtime::Flow::new()
        .step("broken", "dep.flow.b", &job(0))
        .step("after", "dep.flow.a", &job(5))
        .after(["broken"]);
    let id = p.start_flow(failing).await.unwrap();
    assert_eq!(
        p.wait_flow(&id, WAIT).await.unwrap(),
        Some(delayq_runtime::FlowState::Failed)
    );
    assert_eq!(p.retry_flow(&id).await.unwrap(), Some(2));
    assert_eq!(
        p.wait_flow(&id, WAIT).await.unwrap(),
        Some(delayq_runtime::FlowState::Failed),
        "the broken step fails again"
    );
    // Listed (one read a flow, each in a slot of its own), failed ones by their state.
    let listed = p.flows(None, 10).await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let failed = p
        .flows(Some(delayq_runtime::FlowState::Failed), 10)
        .await
        .unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    rt.shutdown().await.unwrap();
}
