//! The history writer of a runtime whose wall clock steps forward by an hour,
//! then back by two (libfaketime in a child process; Redis unfaked): no spin, nothing counted
//! twice or lost, points only in minutes of Redis' clock.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{producer, RedisServer};
use delayq_runtime::{delay_listener, Runtime};

const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

#[delay_listener(topic = "hist.clk")]
async fn handle(_n: u32) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn child_runtime() {
    let Ok(url) = std::env::var("HIST_CLOCK_REDIS_URL") else {
        return;
    };
    let secs: u64 = std::env::var("HIST_CHILD_SECS").unwrap().parse().unwrap();
    let rt = Runtime::builder()
        .redis_url(&url)
        .topics(["hist.clk"])
        .spawn()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    rt.shutdown().await.unwrap();
}

fn evalsha_calls(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_steps_on_the_runtime_neither_spin_nor_double_count_the_history() {
    assert!(Path::new(FAKETIME).exists());
    let server = RedisServer::start();
    let p = producer(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("faketime");
    std::fs::write(&clock, "+0\n").unwrap();
    let started = SystemTime::now();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_runtime", "--ignored", "--nocapture"])
        .env("HIST_CLOCK_REDIS_URL", server.url())
        .env("HIST_CHILD_SECS", "105")
        .env("LD_PRELOAD", FAKETIME)
        .env("FAKETIME_TIMESTAMP_FILE", &clock)
        .env("FAKETIME_NO_CACHE", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sleep = |s: u64| std::thread::sleep(Duration::from_secs(s));
    sleep(4);
    let send = |n: u32| {
        let p = p.clone();
        async move {
            for i in 0..10 {
                p.send("hist.clk", &(n + i), Duration::ZERO).await.unwrap();
            }
        }
    };
    send(0).await;
    sleep(16);
    std::fs::write(&clock, "+1h\n").unwrap();
    let before = evalsha_calls(&server);
    send(10).await;
    sleep(50);
    std::fs::write(&clock, "-1h\n").unwrap();
    send(20).await;
    sleep(30);
    let during = evalsha_calls(&server) - before;
    let status = child.wait().unwrap();
    assert!(status.success(), "child: {status:?}");
    let h = p
        .topic_history("hist.clk", Duration::from_secs(3_600))
        .await
        .unwrap();
    let ok: u64 = h.points.iter().map(|p| p.ok).sum();
    let stamps: Vec<u64> = h
        .points
        .iter()
        .map(|p| p.at.duration_since(UNIX_EPOCH).unwrap().as_secs() / 60)
        .collect();
    let first = started.duration_since(UNIX_EPOCH).unwrap().as_secs() / 60;
    let last = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 60;
    println!("{during} EVALSHA over 80 s of stepped clocks; ok {ok}; minutes {stamps:?} (test ran {first}..={last})");
    assert!(during < 300, "{during} EVALSHA: spinning?");
    assert_eq!(ok, 30, "{h:?}");
    assert!(
        stamps.iter().all(|m| (first..=last).contains(m)),
        "{stamps:?}"
    );
}
