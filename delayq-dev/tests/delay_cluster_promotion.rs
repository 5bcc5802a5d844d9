//! A cluster primary killed (SIGKILL) while a producer starts a send every 5 ms to a topic on
//! its shard (half of them with `replicas(1)`) and a runtime listens to six topics spread over
//! the shards: once the replica is promoted, sends succeed again within 2 s, no send takes
//! longer than its timeouts allow (a send that waits for a replica fails within its replica
//! timeout while the new primary has none, and succeeds again once the old primary is back as
//! its replica), and every topic hears a message sent after the promotion at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq_dev::{sleep_ms, RedisCluster};
use delayq_runtime::{delay_listener, Producer, Runtime, SendOptions};

static HANDLED: Mutex<Vec<(&'static str, u64, Instant)>> = Mutex::new(Vec::new());

fn handled(topic: &'static str, n: u64) {
    HANDLED.lock().unwrap().push((topic, n, Instant::now()));
}

#[delay_listener(topic = "fp.0")]
async fn fp0(n: u64) {
    handled("fp.0", n)
}
#[delay_listener(topic = "fp.1")]
async fn fp1(n: u64) {
    handled("fp.1", n)
}
#[delay_listener(topic = "fp.2")]
async fn fp2(n: u64) {
    handled("fp.2", n)
}
#[delay_listener(topic = "fp.3")]
async fn fp3(n: u64) {
    handled("fp.3", n)
}
#[delay_listener(topic = "fp.4")]
async fn fp4(n: u64) {
    handled("fp.4", n)
}
#[delay_listener(topic = "fp.5")]
async fn fp5(n: u64) {
    handled("fp.5", n)
}

const TOPICS: [&str; 6] = ["fp.0", "fp.1", "fp.2", "fp.3", "fp.4", "fp.5"];
/// The bound the issue sets: sends succeed, and topics hear, within this of the promotion.
const AFTER_PROMOTION: Duration = Duration::from_secs(2);

fn handled_at(topic: &str, n: u64) -> Option<Instant> {
    HANDLED
        .lock()
        .unwrap()
        .iter()
        .find(|(t, m, _)| *t == topic && *m == n)
        .map(|(_, _, at)| *at)
}

async fn wait_handled(topic: &str, n: u64, limit: Duration) -> Option<Instant> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(at) = handled_at(topic, n) {
            return Some(at);
        }
        sleep_ms(10).await;
    }
    None
}

/// One send through the failover: whether it waited for a replica, when it started, how
/// long it took, and how it ended.
struct Sent {
    replicated: bool,
    start: Instant,
    took: Duration,
    ok: Result<(), String>,
}

const REPLICA_TIMEOUT: Duration = Duration::from_secs(1);

/// Starts a send every 5 ms without waiting for the one before (as a service sending on
/// behalf of concurrent requests would), half of them with `replicas(1)`, until `stop`.
fn spawn_senders(p: Producer, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<Sent>> {
    tokio::spawn(async move {
        let mut sends = tokio::task::JoinSet::new();
        let mut n = 1_000u64;
        while !stop.load(Ordering::Relaxed) {
            let (p, replicated) = (p.clone(), n.is_multiple_of(2));
            sends.spawn(async move {
                let mut options = SendOptions::new();
                if replicated {
                    options = options.replicas(1).replica_timeout(REPLICA_TIMEOUT);
                }
                let start = Instant::now();
                let ok = p
                    .send_with("fp.0", &n, options)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string());
                Sent {
                    replicated,
                    start,
                    took: start.elapsed(),
                    ok,
                }
            });
            n += 1;
            sleep_ms(5).await;
        }
        sends.join_all().await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_promotion_sends_succeed_and_every_topic_hears_within_2s() {
    delayq_dev::init_tracing();
    let mut cluster = RedisCluster::start();
    let url = cluster.url();
    let rt = Runtime::builder()
        .redis_url(&url)
        .topics(TOPICS)
        .spawn()
        .await
        .unwrap();
    let p = Producer::connect(&url).await.unwrap();
    let victim = cluster.primary_for("delayq:{fp.0}:delayed");
    let shards: Vec<usize> = TOPICS
        .iter()
        .map(|t| cluster.primary_for(&format!("delayq:{{{t}}}:delayed")))
        .collect();
    println!("primaries by topic: {shards:?}; killing node {victim}");
    assert!(
        shards.iter().any(|&s| s != victim),
        "some topic lives on another shard"
    );
    // Every topic hears before the kill.
    for t in TOPICS {
        p.send(t, &0u64, Duration::ZERO).await.unwrap();
        assert!(wait_handled(t, 0, Duration::from_secs(10)).await.is_some());
    }

    let stop = Arc::new(AtomicBool::new(false));
    let senders = spawn_senders(p.clone(), stop.clone());
    sleep_ms(500).await;
    let (killed, promoted) = tokio::task::block_in_place(|| cluster.kill9_until_promoted(victim));
    println!("replica promoted {:?} after the kill", promoted - killed);

    // Two seconds after the promotion, a message to every topic.
    tokio::time::sleep_until((promoted + AFTER_PROMOTION).into()).await;
    let mut heard = Vec::new();
    for (i, t) in TOPICS.iter().enumerate() {
        let start = Instant::now();
        let sent = p.send(t, &(i as u64 + 1), Duration::ZERO).await;
        heard.push((t, i as u64 + 1, start, start.elapsed(), sent.map(|_| ())));
    }
    // The new primary has no replica until the old one comes back, as its replica.
    sleep_ms(1_000).await;
    let restarting = Instant::now();
    tokio::task::block_in_place(|| cluster.restart_killed());
    let replica_back = Instant::now();
    println!(
        "the killed node is a replica in sync again {:?} after the promotion",
        replica_back - promoted
    );
    sleep_ms(3_000).await;
    stop.store(true, Ordering::Relaxed);
    let sent = senders.await.unwrap();

    if std::env::var_os("PROMO_DEBUG").is_some() {
        for s in sent
            .iter()
            .filter(|s| s.ok.is_err() || s.took > Duration::from_millis(200))
        {
            println!(
                "{} send at {:?} from the kill: took {:?} {:?}",
                if s.replicated { "replicated" } else { "plain" },
                s.start.saturating_duration_since(killed),
                s.took,
                s.ok
            );
        }
    }
    let summary = |replicated: bool| {
        let mine: Vec<&Sent> = sent.iter().filter(|s| s.replicated == replicated).collect();
        let failed = mine.iter().filter(|s| s.ok.is_err()).count();
        let longest = mine.iter().map(|s| s.took).max().unwrap();
        let first_ok = mine
            .iter()
            .filter(|s| s.start >= promoted && s.ok.is_ok())
            .map(|s| s.start + s.took - promoted)
            .min();
        println!(
            "{} sends {}: {failed} failed; the first to succeed after the promotion ended {first_ok:?} after it; the longest took {longest:?}",
            mine.len(),
            if replicated { "with replicas(1)" } else { "without replicas" },
        );
        (mine, first_ok)
    };
    let (plain, plain_first_ok) = summary(false);
    let (replicated, _) = summary(true);
    let settled = promoted + AFTER_PROMOTION;

    let mut deaf = Vec::new();
    for (t, n, start, took, result) in heard {
        let at = wait_handled(t, n, Duration::from_secs(20)).await;
        let wait = at.map(|at| at - start);
        println!("{t}: sent in {took:?} ({result:?}), handled {wait:?} after the send");
        if result.is_err() || wait.is_none_or(|w| w > AFTER_PROMOTION) {
            deaf.push((t, result, wait));
        }
    }
    rt.shutdown().await.unwrap();

    // Plain sends: working again within 2 s of the promotion, and none failing after that.
    assert!(
        plain_first_ok.is_some_and(|t| t <= AFTER_PROMOTION),
        "a plain send succeeds within 2 s of the promotion: first after {plain_first_ok:?}"
    );
    let late: Vec<_> = plain
        .iter()
        .filter(|s| s.start >= settled)
        .filter_map(|s| s.ok.as_ref().err())
        .collect();
    assert!(
        late.is_empty(),
        "{} plain sends failed after the promotion, the first: {:?}",
        late.len(),
        late.iter().take(3).collect::<Vec<_>>()
    );
    // No send takes longer than its timeouts: the response timeout (10 s), which a send made
    // as the primary died spends waiting for the promotion, plus the replica timeout.
    let slack = Duration::from_millis(500);
    for s in &plain {
        assert!(
            s.took <= Duration::from_secs(10) + slack,
            "a plain send took {:?}",
            s.took
        );
    }
    for s in &replicated {
        assert!(
            s.took <= Duration::from_secs(10) + REPLICA_TIMEOUT + slack,
            "a send with replicas(1) took {:?}",
            s.took
        );
    }
    // Once the cluster has settled, a send that waits for a replica takes at most twice its
    // replica timeout (its write may first wait behind the round of WAIT before it): it fails
    // honestly while the new primary has no replica, and succeeds again once it has one.
    for s in replicated.iter().filter(|s| s.start >= settled) {
        assert!(
            s.took <= 2 * REPLICA_TIMEOUT + slack,
            "a send with replicas(1) {:?} after the promotion took {:?} ({:?})",
            s.start - promoted,
            s.took,
            s.ok
        );
        if s.start + s.took < restarting {
            assert!(
                s.ok.as_ref()
                    .is_err_and(|e| e.contains("replicas acknowledged")),
                "without a replica: {:?}",
                s.ok
            );
        }
    }
    let back = replica_back + AFTER_PROMOTION;
    let after_back: Vec<_> = replicated.iter().filter(|s| s.start >= back).collect();
    assert!(!after_back.is_empty(), "sends once the replica is back");
    let failed: Vec<_> = after_back
        .iter()
        .filter_map(|s| s.ok.as_ref().err())
        .collect();
    assert!(
        failed.is_empty(),
        "{} sends with replicas(1) failed with the replica back, the first: {:?}",
        failed.len(),
        failed.iter().take(3).collect::<Vec<_>>()
    );
    assert!(deaf.is_empty(), "topics not woken within 2 s: {deaf:?}");
}
