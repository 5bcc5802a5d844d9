//! One leader at a time when replies come late. Two runtimes contend for one leader task
//! (ttl 1 s, 3 s bodies); one reaches Redis through a proxy that, once it leads, holds every
//! reply back 2.5 s. Its renewals still reach Redis at once, but each confirmation arrives
//! after the lease it confirmed could have lapsed: it must stop its running body before the
//! other can take the lease, and never start a run on such a confirmation.
//!
//! Also: a runtime stopped while its request for the lease is on the way must not leave the
//! lease taken behind it (the next leader would wait out the whole ttl).

use std::sync::Mutex;
use std::time::Duration;

use delayq_dev::{sleep_ms, wait_until, BlackholeProxy, RedisServer};
use delayq_runtime::{leader_task, LeaderLease, Leadership, Producer, Runtime, RuntimeHandle};
use tokio::time::Instant;

/// Each run of the task: its token, when it started, and when it ended (finished or dropped).
static RUNS: Mutex<Vec<(u64, Instant, Option<Instant>)>> = Mutex::new(Vec::new());

/// Records the end of run `i` when the body finishes or is dropped mid-run.
struct EndOfRun(usize);

impl Drop for EndOfRun {
    fn drop(&mut self) {
        RUNS.lock().unwrap()[self.0].2 = Some(Instant::now());
    }
}

#[leader_task(name = "late.leader", every = "100ms", ttl = "1s")]
async fn long_run(leader: Leadership) {
    let i = {
        let mut runs = RUNS.lock().unwrap();
        runs.push((leader.token(), Instant::now(), None));
        runs.len() - 1
    };
    let _end = EndOfRun(i);
    tokio::time::sleep(Duration::from_secs(3)).await;
}

async fn contender(url: String) -> RuntimeHandle {
    Runtime::builder()
        .redis_url(url)
        .leader_tasks(["late.leader"])
        .shutdown_grace(Duration::from_secs(1))
        .spawn()
        .await
        .unwrap()
}

fn runs() -> Vec<(u64, Instant, Option<Instant>)> {
    RUNS.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_replies_come_late_stops_before_another_leads() {
    delayq_dev::init_tracing();
    let server = RedisServer::start();
    let proxy = BlackholeProxy::start(server.port());
    let slow = contender(proxy.url()).await;
    wait_until(Duration::from_secs(10), "the first run", || {
        !runs().is_empty()
    })
    .await;
    let fast = contender(server.url()).await;
    sleep_ms(300).await;
    proxy.delay_replies(Duration::from_millis(2_500));
    let late_from = Instant::now();
    let first = runs()[0].0;
    wait_until(Duration::from_secs(20), "a run by another leader", || {
        runs().iter().any(|r| r.0 != first)
    })
    .await;
    sleep_ms(6_000).await; // the slow one sees its late replies; the other runs its bodies
    proxy.delay_replies(Duration::ZERO);
    fast.shutdown().await.unwrap();
    slow.shutdown().await.unwrap();

    let runs = runs();
    let now = Instant::now();
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if a.0 == b.0 {
                continue;
            }
            let (a_end, b_end) = (a.2.unwrap_or(now), b.2.unwrap_or(now));
            assert!(
                a_end <= b.1 || b_end <= a.1,
                "runs of token {} ({:?}..{:?}) and token {} ({:?}..{:?}) overlap, \
                 counted from when replies became late",
                a.0,
                a.1.saturating_duration_since(late_from),
                a_end.saturating_duration_since(late_from),
                b.0,
                b.1.saturating_duration_since(late_from),
                b_end.saturating_duration_since(late_from),
            );
        }
    }
    for pair in runs.windows(2) {
        assert!(
            pair[1].0 >= pair[0].0,
            "a run with the stale token {} started after token {} had run: {runs:?}",
            pair[1].0,
            pair[0].0
        );
    }
    println!(
        "{} runs, tokens {:?}",
        runs.len(),
        runs.iter().map(|r| r.0).collect::<Vec<_>>()
    );
}

#[leader_task(name = "stopping.leader", every = "1s", ttl = "30s")]
async fn short_run(_leader: Leadership) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_stopped_while_its_acquire_is_on_the_way_leaves_the_lease_free() {
    delayq_dev::init_tracing();
    let server = RedisServer::start();
    let proxy = BlackholeProxy::start(server.port());
    let producer = Producer::connect(&server.url()).await.unwrap();
    // The test holds the lease for 2 s, so the runtime's acquire goes out when that lapses,
    // after every reply to the runtime has started coming 800 ms late: the acquire takes the
    // lease in Redis at once, and the runtime is stopped before it hears so.
    let mine = LeaderLease::new(&producer, "stopping.leader", Duration::from_secs(2)).unwrap();
    let my_token = mine.try_acquire().await.unwrap().unwrap().token();
    let runtime = Runtime::builder()
        .redis_url(proxy.url())
        .leader_tasks(["stopping.leader"])
        .shutdown_grace(Duration::from_secs(5))
        .spawn()
        .await
        .unwrap();
    proxy.delay_replies(Duration::from_millis(800));
    let mut taken = None;
    for _ in 0..10_000 {
        taken = mine.holder().await.unwrap().filter(|t| *t != my_token);
        if taken.is_some() {
            break;
        }
        sleep_ms(1).await;
    }
    let token = taken.expect("the runtime's acquire reached Redis within 10 s");
    runtime.shutdown().await.unwrap();
    let after = mine.holder().await.unwrap();
    assert_eq!(
        after, None,
        "token {token} still holds the lease after its runtime stopped: the next leader \
         would wait out its 30 s ttl"
    );
}
