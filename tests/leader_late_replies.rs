//! One leader at a time when replies come late. Two runtimes contend for one leader task
//! (ttl 1 s, 3 s bodies); one reaches Redis through a proxy that, once it leads, holds every
//! reply back 2.5 s. Its renewals still reach Redis at once, but each confirmation arrives
//! after the lease it confirmed could have lapsed: it must stop its running body before the
//! other can take the lease, and never start a run on such a confirmation.

use std::sync::Mutex;
use std::time::Duration;

use delayq_dev::{sleep_ms, wait_until, BlackholeProxy, RedisServer};
use delayq_runtime::{leader_task, Leadership, Runtime, RuntimeHandle};
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
