//! Sends with `replicas(n)`: concurrent ones share one `WAIT` per round on a connection of
//! their own, instead of one `WAIT` each in turn on the producer's shared connection (where a
//! missing replica made N sends take N replica timeouts and held up every other command).
//! Counted as work: the `WAIT` calls Redis ran (`INFO commandstats`).

use std::time::Duration;

use delayq_dev::RedisServer;
use delayq_runtime::{Producer, SendOptions};

const SENDS: u64 = 200;

fn wait_calls(server: &RedisServer) -> u64 {
    let mut c = server.connection();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

fn wait_for_replica(replica: &RedisServer) {
    for _ in 0..200 {
        let mut c = replica.connection();
        let info: String = redis::cmd("INFO").arg("replication").query(&mut c).unwrap();
        if info.contains("master_link_status:up") {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the replica did not connect");
}

/// Sends `SENDS` messages at once with `replicas(1)`; how many were acknowledged by a replica,
/// and how many failed, and how.
async fn send_all(p: &Producer, timeout: Duration) -> (usize, Vec<String>) {
    let sends = (0..SENDS).map(|n| {
        let p = p.clone();
        tokio::spawn(async move {
            let options = SendOptions::new().replicas(1).replica_timeout(timeout);
            p.send_with("replicated", &n, options).await
        })
    });
    let mut ok = 0;
    let mut failed = Vec::new();
    for send in futures_util::future::join_all(sends).await {
        match send.unwrap() {
            Ok(_) => ok += 1,
            Err(e) => failed.push(e.to_string()),
        }
    }
    (ok, failed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_sends_without_a_replica_share_rounds_of_wait() {
    let server = RedisServer::start();
    let p = Producer::connect(&server.url()).await.unwrap();
    let before = wait_calls(&server);
    let (ok, failed) = send_all(&p, Duration::from_millis(300)).await;
    let waits = wait_calls(&server) - before;
    println!("{SENDS} concurrent sends with replicas(1) and no replica: {ok} acknowledged, {} failed, {waits} WAIT calls", failed.len());
    assert_eq!(ok, 0);
    assert!(
        failed
            .iter()
            .all(|e| e.contains("only 0 of 1 replicas acknowledged")),
        "each fails as not replicated: {:?}",
        failed.first()
    );
    // One round covers every send that wrote while the round before waited: a handful of
    // rounds, not one WAIT per send.
    assert!(waits <= 10, "{waits} WAIT calls for {SENDS} sends");
    // Every message was written all the same (the error says it may survive).
    assert_eq!(
        p.counts("replicated").await.unwrap().delayed,
        SENDS as usize
    );
    // The producer's other calls were never behind a WAIT: a plain send meanwhile answers.
    let p2 = p.clone();
    let blocked = tokio::spawn(async move { send_all(&p2, Duration::from_secs(2)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let plain = tokio::time::timeout(
        Duration::from_millis(1_500),
        p.send("replicated", &0u64, Duration::ZERO),
    )
    .await;
    assert!(
        matches!(plain, Ok(Ok(_))),
        "a plain send answers while replicated ones wait: {plain:?}"
    );
    let _ = blocked.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_sends_with_a_replica_are_all_acknowledged() {
    let primary = RedisServer::start();
    let port = primary.port().to_string();
    let replica = RedisServer::builder()
        .config_values("replicaof", &["127.0.0.1", &port])
        .start();
    wait_for_replica(&replica);
    let p = Producer::connect(&primary.url()).await.unwrap();
    let before = wait_calls(&primary);
    let (ok, failed) = send_all(&p, Duration::from_secs(5)).await;
    let waits = wait_calls(&primary) - before;
    println!("{SENDS} concurrent sends with replicas(1) and a replica: {ok} acknowledged, {} failed, {waits} WAIT calls", failed.len());
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(ok as u64, SENDS);
    assert_eq!(
        p.counts("replicated").await.unwrap().delayed,
        SENDS as usize
    );
}
