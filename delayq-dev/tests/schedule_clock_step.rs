//! a step of this machine's clock between two readings of Redis' clock (the tick
//! producer measures the offset once a minute: every 6th poll of 10 s). The runtime under
//! test runs in a child process whose wall clock libfaketime steps (monotonic time stays
//! real); Redis runs unfaked in this process' server.
//!
//! - Forward by an hour: every tick looks due, tick.lua answers 'clock' (caller ahead), the
//!   retry with Redis' now says NotYet, and the producer computes its sleep from the stepped
//!   clock: 0. It spins, one script call after another, until the next clock reading.
//! - Back by an hour: every tick looks an hour away, so nothing is produced until the next
//!   clock reading, up to a minute later.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use delayq_dev::RedisServer;
use delayq_runtime::{delay_listener, Runtime, Schedule};

const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

#[delay_listener(topic = "review.clock")]
async fn tick(_payload: u8) {}

/// The runtime, in the child (run by the parent test only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn child_runtime() {
    let Ok(url) = std::env::var("CLOCK_STEP_REDIS_URL") else {
        return;
    };
    let rt = Runtime::builder()
        .redis_url(&url)
        .topics(["review.clock"])
        .spawn()
        .await
        .unwrap();
    rt.producer()
        .upsert_schedule(
            "clock",
            Schedule::every(Duration::from_secs(1)).unwrap(),
            "review.clock",
            &1u8,
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
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

/// EVALSHA calls seen by MONITOR in `d`, and how many name the schedule's record.
fn monitor(server: &RedisServer, d: Duration) -> (usize, usize) {
    use std::io::{Read, Write};
    let port: u16 = server
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"MONITOR\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut out = Vec::new();
    let end = Instant::now() + d;
    let mut buf = [0u8; 65536];
    while Instant::now() < end {
        if let Ok(n) = s.read(&mut buf) {
            out.extend_from_slice(&buf[..n]);
        }
    }
    let text = String::from_utf8_lossy(&out);
    let calls: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\"EVALSHA\"") || l.contains("\"evalsha\""))
        .collect();
    let on_record = calls
        .iter()
        .filter(|l| l.contains("schedule:clock"))
        .count();
    (calls.len(), on_record)
}

fn reset_stats(server: &RedisServer) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut server.connection())
        .unwrap();
}

/// Distinct values of the record's `last` (one per write of ticks) seen in `d`.
fn ticks_written(server: &RedisServer, d: Duration) -> usize {
    let mut seen = std::collections::HashSet::new();
    let end = Instant::now() + d;
    while Instant::now() < end {
        let last: Option<String> = redis::cmd("HGET")
            .arg("delayq:{review.clock}:schedule:clock")
            .arg("last")
            .query(&mut server.connection())
            .unwrap();
        if let Some(l) = last {
            seen.insert(l);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    seen.len()
}

#[test]
fn a_clock_step_neither_spins_nor_stops_the_tick_producer() {
    assert!(
        Path::new(FAKETIME).exists(),
        "this test needs libfaketime (apt-get install libfaketime)"
    );
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("faketime");
    std::fs::write(&clock, "+0\n").unwrap();
    let child = KillOnDrop(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_runtime", "--ignored", "--nocapture"])
            .env("CLOCK_STEP_REDIS_URL", server.url())
            .env("LD_PRELOAD", FAKETIME)
            .env("FAKETIME_TIMESTAMP_FILE", &clock)
            .env("FAKETIME_NO_CACHE", "1")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Started, producing a tick a second (and its first clock reading done).
    std::thread::sleep(Duration::from_secs(4));
    reset_stats(&server);
    let steady_ticks = ticks_written(&server, Duration::from_secs(4));
    let steady = evalsha_calls(&server);

    std::fs::write(&clock, "+1h\n").unwrap();
    reset_stats(&server);
    std::thread::sleep(Duration::from_secs(3));
    let forward = evalsha_calls(&server);
    let (calls, on_record) = monitor(&server, Duration::from_secs(1));
    println!("MONITOR 1 s after +1h: {calls} EVALSHA, {on_record} of them on the schedule's record (tick.lua)");

    std::fs::write(&clock, "-1h\n").unwrap();
    let backward_ticks = ticks_written(&server, Duration::from_secs(8));

    drop(child);
    println!(
        "4 s steady: {steady} EVALSHA, {steady_ticks} writes of ticks; 3 s after +1h: {forward} EVALSHA; 8 s after -1h: {backward_ticks} writes of ticks"
    );
    assert!(
        steady_ticks >= 3,
        "not producing before the step: {steady_ticks}"
    );
    let mut problems = Vec::new();
    if forward > 10 * steady.max(20) {
        problems.push(format!(
            "clock stepped forward 1 h: {forward} EVALSHA in 3 s (steady: {steady} in 4 s): the tick producer spins"
        ));
    }
    if backward_ticks < 4 {
        problems.push(format!(
            "clock stepped back 1 h: {backward_ticks} writes of ticks in 8 s of an every-1s schedule"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The child runtime, ended however the test ends (a failed assertion included).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
