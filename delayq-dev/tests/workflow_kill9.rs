//! Flows across consumer processes killed with SIGKILL while they run (wherever the kill lands:
//! in a handler, between an ack and its settle, between a settle and the sends): every flow
//! ends done, every step ran, and no step ran before every step it waits for had run.

use std::collections::BTreeMap;
use std::time::Duration;

use delayq_dev::{producer, read_ledger, sleep_ms, ConsumerProcess, RedisServer};
use delayq_runtime::{Flow, FlowState};

const FLOWS: u64 = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_end_done_across_consumers_killed_with_sigkill() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let mut consumers: Vec<ConsumerProcess> = (0..2)
        .map(|_| ConsumerProcess::start(&server.url(), &ledger, 50))
        .collect();
    // Each flow: a root, three steps after it, one after those three (payloads base + 0..4).
    let mut ids = Vec::new();
    for i in 0..FLOWS {
        let base = i * 10;
        let flow = Flow::new()
            .step("root", "proc.work", &base)
            .step("x", "proc.work", &(base + 1))
            .after(["root"])
            .step("y", "proc.work", &(base + 2))
            .after(["root"])
            .step("z", "proc.work", &(base + 3))
            .after(["root"])
            .step("join", "proc.work", &(base + 4))
            .after(["x", "y", "z"]);
        ids.push(p.start_flow(flow).await.unwrap());
    }
    // Each of the two first consumers killed (-9) mid-run, once it has run some steps, and a
    // new one started in its place.
    let mut killed = Vec::new();
    for consumer in consumers.iter_mut() {
        let pid = consumer.pid();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while read_ledger(&ledger).iter().filter(|l| l.pid == pid).count() < 20 {
            assert!(
                std::time::Instant::now() < deadline,
                "consumer {pid} ran nothing in 60 s"
            );
            sleep_ms(5).await;
        }
        killed.push((pid, read_ledger(&ledger).len()));
        consumer.kill9();
        *consumer = ConsumerProcess::start(&server.url(), &ledger, 50);
    }
    for id in &ids {
        assert_eq!(
            p.wait_flow(id, Duration::from_secs(120)).await.unwrap(),
            Some(FlowState::Done),
            "flow {id}: {:?}",
            p.flow(id).await.unwrap()
        );
    }
    let lines = read_ledger(&ledger);
    // The first run of each payload.
    let mut first: BTreeMap<u64, u64> = BTreeMap::new();
    for l in &lines {
        let at = first.entry(l.payload).or_insert(l.at_us);
        *at = (*at).min(l.at_us);
    }
    let runs = lines.len() as u64;
    println!(
        "{} steps ran {runs} times in all (runs again after a kill: {})",
        5 * FLOWS,
        runs - 5 * FLOWS
    );
    // Each kill landed mid-run: the killed process had handled steps, and steps were left.
    for (pid, done_at_kill) in &killed {
        assert!(
            lines.iter().any(|l| l.pid == *pid),
            "consumer {pid} had run nothing when killed"
        );
        assert!(
            *done_at_kill < (5 * FLOWS) as usize,
            "all steps had run before the kill"
        );
    }
    for i in 0..FLOWS {
        let base = i * 10;
        let at = |k: u64| {
            *first
                .get(&(base + k))
                .unwrap_or_else(|| panic!("step {} of flow {i} never ran", base + k))
        };
        for child in 1..=3 {
            assert!(
                at(child) > at(0),
                "flow {i}: step {child} ran before the root"
            );
        }
        assert!(
            at(4) > at(1).max(at(2)).max(at(3)),
            "flow {i}: the join ran before one of the three it waits for"
        );
    }
    for mut c in consumers {
        c.kill9();
    }
}
