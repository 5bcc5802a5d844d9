//! Acks riding on claims, attacked (written in an adversarial review of the change; each
//! failed on its first version and was fixed): thousands of acks waiting for one boss, an ack
//! that fails once during a shutdown, a claim that fails after acks rode on it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use delayq_dev::{keys, producer, runtime_at, sleep_ms, state, BlackholeProxy, RedisServer, Seen};
use delayq_runtime::{delay_listener, Message};

// ------------------------------------------------------------------------------------------
// 1. More than 1,000 acks waiting for the boss: it takes at most 1,000 a wake-up, and is
//    woken again for the rest (it used to leave them waiting, with their slots).

const SHORT: usize = 5_000;
static GATE: AtomicBool = AtomicBool::new(false);
static SHORT_RUNNING: AtomicUsize = AtomicUsize::new(0);
static SHORT_IDS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static LONG_STARTED: AtomicUsize = AtomicUsize::new(0);

#[delay_listener(topic = "ride.many", concurrency = 5000, ack_timeout = "120s")]
async fn many_handler(msg: Message<u32>) {
    if (*msg.payload() as usize) < SHORT {
        SHORT_IDS.lock().unwrap().push(msg.id().to_string());
        SHORT_RUNNING.fetch_add(1, Ordering::SeqCst);
        while !GATE.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    } else {
        // A long run: holds its slot for a minute.
        LONG_STARTED.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_returned_handlers_all_get_their_acks_out_promptly() {
    delayq_dev::init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "ride.many";
    // The runtime reaches Redis through a proxy that can slow its replies down.
    let proxy = BlackholeProxy::start(server.port());
    let rt = runtime_at(&proxy.url(), &[t], Duration::from_secs(1)).await;
    p.send_batch(t, (0..SHORT as u32).map(|i| (i, Duration::ZERO)))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while SHORT_RUNNING.load(Ordering::SeqCst) < SHORT {
        assert!(
            Instant::now() < deadline,
            "the short runs never all started"
        );
        sleep_ms(20).await;
    }
    // Every slot is taken; the boss's last claim took all it asked for (it rides). More is
    // due: long runs.
    p.send_batch(
        t,
        (SHORT as u32..2 * SHORT as u32).map(|i| (i, Duration::ZERO)),
    )
    .await
    .unwrap();
    sleep_ms(200).await;
    // A slow path (each reply 500 ms late; the ack deadline is 120 s): all short handlers
    // return at once, while the boss's first claim after the first of them is on its way.
    proxy.delay_replies(Duration::from_millis(500));
    GATE.store(true, Ordering::SeqCst);
    let ids = SHORT_IDS.lock().unwrap().clone();
    assert_eq!(ids.len(), SHORT);
    let inflight_of = |ids: &[String]| -> usize {
        let mut c = server.connection();
        let scores: Vec<Option<f64>> = redis::cmd("ZMSCORE")
            .arg(keys(t).inflight)
            .arg(ids)
            .query(&mut c)
            .unwrap();
        scores.iter().filter(|s| s.is_some()).count()
    };
    // Their acks should all land within a few seconds (the ack deadline is 120 s).
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut left = inflight_of(&ids);
    while left > 0 && Instant::now() < deadline {
        sleep_ms(100).await;
        left = inflight_of(&ids);
    }
    println!(
        "{left} of {SHORT} returned handlers still unacked 15 s after they returned; {} long runs started",
        LONG_STARTED.load(Ordering::SeqCst)
    );
    assert_eq!(
        left, 0,
        "acks of handlers that returned are stuck waiting for the boss"
    );
    let _ = rt.shutdown().await;
}

// ------------------------------------------------------------------------------------------
// 2. Shutdown: an ack that failed once is retried within the grace (the worker's `settle`),
//    so the shutdown waits for it instead of handing a finished message back: the slot the
//    ack lent comes back with the error, and the run holds it while it retries.

static SHUT_GATE: AtomicBool = AtomicBool::new(false);
static SHUT_SEEN: Seen<u32> = Seen::new();

#[delay_listener(topic = "ride.shutack", ack_timeout = "60s")]
async fn shut_handler(msg: Message<u32>) {
    SHUT_SEEN.push(*msg.payload());
    while !SHUT_GATE.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn acl(server: &RedisServer, rules: &[&str]) {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER").arg("default");
    for r in rules {
        cmd.arg(*r);
    }
    cmd.query::<()>(&mut server.connection()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_within_the_grace_for_an_ack_that_failed_once() {
    delayq_dev::init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "ride.shutack";
    let rt = runtime_at(&server.url(), &[t], Duration::from_secs(10)).await;
    let id = p.send(t, &7u32, Duration::ZERO).await.unwrap();
    SHUT_SEEN.wait_for(1, Duration::from_secs(10)).await;
    // Scripts refused for a second: the handler's first ack fails, the worker retries it.
    acl(&server, &["-evalsha", "-eval"]);
    let shutdown = tokio::spawn(rt.shutdown());
    sleep_ms(100).await;
    SHUT_GATE.store(true, Ordering::SeqCst);
    sleep_ms(1000).await;
    acl(&server, &["+evalsha", "+eval"]);
    let started = Instant::now();
    let result = shutdown.await.unwrap();
    println!(
        "shutdown: {result:?} ({:?} after the scripts were allowed again); the message is {}",
        started.elapsed(),
        state(&server, t, &id)
    );
    assert!(result.is_ok(), "shutdown: {result:?}");
    assert_eq!(
        state(&server, t, &id),
        "gone",
        "the handler finished within the grace; its ack should have landed"
    );
}

// ------------------------------------------------------------------------------------------
// 3. A claim that fails in its claim part (Redis does not roll a script back): the acks
//    riding on it must not have been applied, or the workers, told their acks failed, retry
//    them, get Stale, and the runtime never counts them as handled. The acks go last.

static LUA_GATE: AtomicBool = AtomicBool::new(false);
static LUA_SEEN: Seen<u32> = Seen::new();

#[delay_listener(topic = "ride.luaerr", concurrency = 1, ack_timeout = "60s")]
async fn luaerr_handler(msg: Message<u32>) {
    LUA_SEEN.push(*msg.payload());
    while !LUA_GATE.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_applied_by_a_claim_that_then_failed_is_counted_as_handled() {
    delayq_dev::init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "ride.luaerr";
    let rt = runtime_at(&server.url(), &[t], Duration::from_secs(5)).await;
    let id = p.send(t, &1u32, Duration::ZERO).await.unwrap();
    LUA_SEEN.wait_for(1, Duration::from_secs(10)).await;
    // The boss's claim took all it asked for (1 of 1): it rides. The delayed set is broken by
    // hand, so the claim part of its next call fails (WRONGTYPE) after its acks were done.
    let delayed = keys(t).delayed;
    let _: () = redis::cmd("SET")
        .arg(&delayed)
        .arg("not a sorted set")
        .query(&mut server.connection())
        .unwrap();
    LUA_GATE.store(true, Ordering::SeqCst);
    sleep_ms(1500).await;
    let _: () = redis::cmd("DEL")
        .arg(&delayed)
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(
        state(&server, t, &id),
        "gone",
        "the handler's ack was applied"
    );
    assert_eq!(p.topic_stats(t).await.unwrap().last_minute.ok, 1);
    rt.shutdown().await.unwrap();
    let h = p
        .topic_history(t, Duration::from_secs(3_600))
        .await
        .unwrap();
    let ok: u64 = h.points.iter().map(|p| p.ok).sum();
    println!("history after shutdown: {ok} ok");
    assert_eq!(
        ok, 1,
        "the runtime's own count (history, metrics) misses an ack Redis applied"
    );
}
