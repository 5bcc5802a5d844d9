//! A claim call on its way when the shutdown grace runs out (a slow Redis): what it took is
//! neither run nor handed back, so the shutdown must count it as not returned. Written in an
//! adversarial review (it failed with the boss of one call at a time too); and two calls on
//! their way keep `concurrency`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use delayq_dev::{
    producer, runtime, runtime_at, sleep_ms, state, BlackholeProxy, RedisServer, Seen,
};
use delayq_runtime::{delay_listener, Error, Message};

// ------------------------------------------------------------------------------------------
// 1. A claim call on its way at shutdown whose reply comes after the grace: the boss is
//    aborted with the call (its deliveries never spawned, never entered in the books), so
//    the message it claimed is neither run nor handed back nor counted as unreturned.

static FLIGHT_GATE: AtomicBool = AtomicBool::new(false);
static FLIGHT_SEEN: Seen<u32> = Seen::new();

#[delay_listener(topic = "flight.flight", concurrency = 3, ack_timeout = "60s")]
async fn flight_handler(msg: Message<u32>) {
    FLIGHT_SEEN.push(*msg.payload());
    while !FLIGHT_GATE.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_on_its_way_at_shutdown_is_handed_back_or_counted() {
    delayq_dev::init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flight.flight";
    let proxy = BlackholeProxy::start(server.port());
    let rt = runtime_at(&proxy.url(), &[t], Duration::from_secs(1)).await;
    let mut ids = vec![p.send(t, &0u32, Duration::ZERO).await.unwrap()];
    FLIGHT_SEEN.wait_for(1, Duration::from_secs(10)).await;
    sleep_ms(200).await; // the boss sleeps again (nothing due)
                         // Replies (and wake-ups) come 1.6 s late from now on; requests reach Redis at once.
    proxy.delay_replies(Duration::from_millis(1600));
    for n in 1..3u32 {
        ids.push(p.send(t, &n, Duration::ZERO).await.unwrap());
    }
    // The boss hears of them 1.6 s late and claims (a third of 3: one); the claim is done in
    // Redis at once, its reply is on its way for 1.6 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ids[1..]
        .iter()
        .any(|id| state(&server, t, id) == "inflight")
    {
        assert!(Instant::now() < deadline, "never claimed");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let before: Vec<&str> = ids.iter().map(|id| state(&server, t, id)).collect();
    println!("before shutdown (a claim on its way): {before:?}");
    let started = Instant::now();
    let result = rt.shutdown().await;
    println!("shutdown took {:?}: {result:?}", started.elapsed());
    FLIGHT_GATE.store(true, Ordering::SeqCst);
    // Let every held reply through, then look at Redis.
    proxy.delay_replies(Duration::ZERO);
    sleep_ms(2500).await;
    let states: Vec<&str> = ids.iter().map(|id| state(&server, t, id)).collect();
    let stuck = states.iter().filter(|s| **s == "inflight").count();
    println!(
        "after shutdown: {states:?}; handlers saw {:?}",
        FLIGHT_SEEN.all()
    );
    let counted = match &result {
        Ok(()) => 0,
        Err(Error::Unreturned { count }) => *count,
        Err(e) => panic!("shutdown: {e}"),
    };
    assert!(
        stuck <= counted,
        "{stuck} message(s) left in flight, never run, never handed back, but the shutdown \
         said {result:?}; states {states:?}"
    );
}

// ------------------------------------------------------------------------------------------
// 2. Concurrency 2 (a third clamped to 1, two calls on their way, acks lending slots): never
//    more than 2 handlers at once.

static C2_RUNNING: AtomicUsize = AtomicUsize::new(0);
static C2_MAX: AtomicUsize = AtomicUsize::new(0);
static C2_SEEN: Seen<u32> = Seen::new();

#[delay_listener(topic = "flight.c2", concurrency = 2, ack_timeout = "60s")]
async fn c2_handler(msg: Message<u32>) {
    let now = C2_RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
    C2_MAX.fetch_max(now, Ordering::SeqCst);
    if msg.payload().is_multiple_of(3) {
        tokio::task::yield_now().await;
    } else {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    C2_RUNNING.fetch_sub(1, Ordering::SeqCst);
    C2_SEEN.push(*msg.payload());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_two_holds_with_two_calls_on_their_way() {
    delayq_dev::init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flight.c2";
    let rt = runtime(&server, &[t]).await;
    p.send_batch(t, (0..600u32).map(|i| (i, Duration::ZERO)))
        .await
        .unwrap();
    let mut seen = C2_SEEN.wait_for(600, Duration::from_secs(60)).await;
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 600);
    assert!(
        C2_MAX.load(Ordering::SeqCst) <= 2,
        "{} handlers ran at once",
        C2_MAX.load(Ordering::SeqCst)
    );
    rt.shutdown().await.unwrap();
}
