//! Redis Cluster: 100 topics and 50,000 messages spread over the 3 shards, every message
//! handled exactly once; and failover on Cluster and Sentinel: a primary killed with SIGKILL
//! mid-run, its replica promoted, the runtime following without a restart. Sends acknowledged
//! without `replicas(1)` can be lost in a failover (the test prints how many were); with it,
//! none are.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use delayq_dev::{sleep_ms, RedisCluster, TestRedis};
use delayq_runtime::{delay_listener, Producer, Runtime, SendOptions};

// --- 100 topics over the shards -----------------------------------------------------------

static SPREAD: Mutex<Option<HashMap<(String, u32), u32>>> = Mutex::new(None);

fn record(topic: &str, n: u32) {
    let mut seen = SPREAD.lock().unwrap();
    *seen
        .get_or_insert_with(HashMap::new)
        .entry((topic.to_string(), n))
        .or_insert(0) += 1;
}

macro_rules! spread_listeners {
    ($topics:ident: $($name:ident = $topic:literal),* $(,)?) => {
        $(#[delay_listener(topic = $topic, concurrency = 32)]
        async fn $name(n: u32) {
            record($topic, n);
        })*
        const $topics: &[&str] = &[$($topic),*];
    };
}

spread_listeners!(
    SPREAD_TOPICS:
    t00 = "spread.00",
    t01 = "spread.01",
    t02 = "spread.02",
    t03 = "spread.03",
    t04 = "spread.04",
    t05 = "spread.05",
    t06 = "spread.06",
    t07 = "spread.07",
    t08 = "spread.08",
    t09 = "spread.09",
    t10 = "spread.10",
    t11 = "spread.11",
    t12 = "spread.12",
    t13 = "spread.13",
    t14 = "spread.14",
    t15 = "spread.15",
    t16 = "spread.16",
    t17 = "spread.17",
    t18 = "spread.18",
    t19 = "spread.19",
    t20 = "spread.20",
    t21 = "spread.21",
    t22 = "spread.22",
    t23 = "spread.23",
    t24 = "spread.24",
    t25 = "spread.25",
    t26 = "spread.26",
    t27 = "spread.27",
    t28 = "spread.28",
    t29 = "spread.29",
    t30 = "spread.30",
    t31 = "spread.31",
    t32 = "spread.32",
    t33 = "spread.33",
    t34 = "spread.34",
    t35 = "spread.35",
    t36 = "spread.36",
    t37 = "spread.37",
    t38 = "spread.38",
    t39 = "spread.39",
    t40 = "spread.40",
    t41 = "spread.41",
    t42 = "spread.42",
    t43 = "spread.43",
    t44 = "spread.44",
    t45 = "spread.45",
    t46 = "spread.46",
    t47 = "spread.47",
    t48 = "spread.48",
    t49 = "spread.49",
    t50 = "spread.50",
    t51 = "spread.51",
    t52 = "spread.52",
    t53 = "spread.53",
    t54 = "spread.54",
    t55 = "spread.55",
    t56 = "spread.56",
    t57 = "spread.57",
    t58 = "spread.58",
    t59 = "spread.59",
    t60 = "spread.60",
    t61 = "spread.61",
    t62 = "spread.62",
    t63 = "spread.63",
    t64 = "spread.64",
    t65 = "spread.65",
    t66 = "spread.66",
    t67 = "spread.67",
    t68 = "spread.68",
    t69 = "spread.69",
    t70 = "spread.70",
    t71 = "spread.71",
    t72 = "spread.72",
    t73 = "spread.73",
    t74 = "spread.74",
    t75 = "spread.75",
    t76 = "spread.76",
    t77 = "spread.77",
    t78 = "spread.78",
    t79 = "spread.79",
    t80 = "spread.80",
    t81 = "spread.81",
    t82 = "spread.82",
    t83 = "spread.83",
    t84 = "spread.84",
    t85 = "spread.85",
    t86 = "spread.86",
    t87 = "spread.87",
    t88 = "spread.88",
    t89 = "spread.89",
    t90 = "spread.90",
    t91 = "spread.91",
    t92 = "spread.92",
    t93 = "spread.93",
    t94 = "spread.94",
    t95 = "spread.95",
    t96 = "spread.96",
    t97 = "spread.97",
    t98 = "spread.98",
    t99 = "spread.99",
);

const PER_TOPIC: u32 = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_100_topics_50000_messages_each_handled_exactly_once() {
    let cluster = RedisCluster::start();
    let p = Producer::connect(&cluster.url()).await.unwrap();
    let sends = SPREAD_TOPICS.iter().map(|topic| {
        let p = p.clone();
        async move {
            let items = (0..PER_TOPIC).map(|n| (n, Duration::ZERO));
            p.send_batch(topic, items).await
        }
    });
    for result in futures_util::future::join_all(sends).await {
        result.unwrap();
    }
    let spread = cluster.keys_per_primary("delayq:*");
    println!("keys per primary (port: keys) while 50,000 messages are pending: {spread:?}");
    assert_eq!(spread.len(), 3);
    assert!(spread.values().all(|&k| k > 0), "every shard holds topics");

    let started = Instant::now();
    let rt = Runtime::builder()
        .redis_url(cluster.url())
        .topics(SPREAD_TOPICS.iter().copied())
        .spawn()
        .await
        .unwrap();
    let total = SPREAD_TOPICS.len() * PER_TOPIC as usize;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let handled = SPREAD.lock().unwrap().as_ref().map_or(0, HashMap::len);
        if handled == total {
            break;
        }
        assert!(Instant::now() < deadline, "handled {handled} of {total}");
        sleep_ms(100).await;
    }
    let took = started.elapsed();
    rt.shutdown().await.unwrap();
    let seen = SPREAD.lock().unwrap().take().unwrap();
    let twice: Vec<_> = seen.iter().filter(|(_, &c)| c != 1).collect();
    assert!(twice.is_empty(), "handled more than once: {twice:?}");
    for topic in SPREAD_TOPICS {
        let c = p.counts(topic).await.unwrap();
        assert_eq!((c.delayed, c.inflight, c.dead), (0, 0, 0), "{topic}");
    }
    println!(
        "{total} messages over 100 topics on 3 shards: each handled exactly once, in {took:?}"
    );
}

// --- failover -----------------------------------------------------------------------------

static HANDLED: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

#[delay_listener(topic = "fo.work", concurrency = 64)]
async fn failover_work(n: u64) {
    HANDLED
        .lock()
        .unwrap()
        .get_or_insert_with(HashSet::new)
        .insert(n);
}

/// While messages are sent one after another, a thread kills the primary that holds the
/// topic, waits for a replica to take over, and restarts the killed node (so that
/// `replicas(1)` has a replica to wait for again). Returns the numbers whose send returned
/// `Ok`, and how many sends failed.
async fn send_through_failover(
    p: &Producer,
    first: u64,
    replicas: u32,
    redis: TestRedis,
) -> (Vec<u64>, usize, TestRedis) {
    let chaos = std::thread::spawn(move || {
        let mut redis = redis;
        std::thread::sleep(Duration::from_millis(500));
        redis.kill_primary_of("delayq:{fo.work}:delayed");
        let killed = Instant::now();
        redis.wait_failover();
        let promoted = killed.elapsed();
        redis.restart_killed();
        println!(
            "failover: replica promoted {promoted:?} after the kill; the old primary back as a replica after {:?}",
            killed.elapsed()
        );
        redis
    });
    let (mut acked, mut failed) = (Vec::new(), 0);
    let mut n = first;
    // Send all through the failover, then a little more.
    let mut after = None;
    while after.is_none_or(|t: Instant| t.elapsed() < Duration::from_millis(500)) {
        if after.is_none() && chaos.is_finished() {
            after = Some(Instant::now());
        }
        let mut options = SendOptions::new();
        if replicas > 0 {
            options = options
                .replicas(replicas)
                .replica_timeout(Duration::from_millis(500));
        }
        match p.send_with("fo.work", &n, options).await {
            Ok(_) => acked.push(n),
            Err(_) => failed += 1,
        }
        n += 1;
        // About 200 sends a second: enough to straddle the failover, few enough to drain.
        sleep_ms(5).await;
    }
    (acked, failed, chaos.join().expect("the chaos thread"))
}

async fn failover(kind: &str, replicas: u32, first: u64) {
    delayq_dev::init_tracing();
    let redis = TestRedis::start(kind);
    let url = redis.url();
    let rt = Runtime::builder()
        .redis_url(&url)
        .topics(["fo.work"])
        .spawn()
        .await
        .unwrap();
    let p = Producer::connect(&url).await.unwrap();
    let started = Instant::now();
    let (acked, failed, _redis) = send_through_failover(&p, first, replicas, redis).await;
    // The runtime was never restarted: it follows the promoted replica and finishes.
    let deadline = Instant::now() + Duration::from_secs(60);
    let wanted: HashSet<u64> = acked.iter().copied().collect();
    let lost = loop {
        let handled = HANDLED.lock().unwrap().clone().unwrap_or_default();
        let lost: Vec<u64> = wanted.difference(&handled).copied().collect();
        let idle = p
            .counts("fo.work")
            .await
            .is_ok_and(|c| c.delayed == 0 && c.inflight == 0);
        if (lost.is_empty() && idle) || Instant::now() > deadline {
            break lost;
        }
        sleep_ms(100).await;
    };
    println!(
        "{kind}, replicas({replicas}): {} sends through a primary SIGKILL: {} acknowledged, {failed} failed during the failover, {} acknowledged sends lost (in {:?})",
        acked.len() + failed,
        acked.len(),
        lost.len(),
        started.elapsed()
    );
    assert!(
        acked.len() >= 50,
        "sends succeed before and after the failover: {}",
        acked.len()
    );
    if replicas > 0 {
        assert!(lost.is_empty(), "{kind}: lost acknowledged sends: {lost:?}");
    } else {
        // Without WAIT only the writes the old primary had not yet replicated can go: on
        // loopback, the last few milliseconds (sends run every 5 ms). Hundreds lost would
        // mean writes went to a stale primary.
        assert!(
            lost.len() <= 10,
            "{kind}: lost {} acknowledged sends",
            lost.len()
        );
    }
    let c = p.counts("fo.work").await.unwrap();
    assert_eq!(
        (c.delayed, c.inflight),
        (0, 0),
        "the runtime finished without a restart"
    );
    rt.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_failover_without_replicas_wait() {
    failover("cluster", 0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_failover_with_replicas_1_loses_nothing() {
    failover("cluster", 1, 100_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_without_replicas_wait() {
    failover("sentinel", 0, 200_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_with_replicas_1_loses_nothing() {
    failover("sentinel", 1, 300_000).await;
}
