//! the health port's cap of 128 connections closes the oldest when a new one comes,
//! whether or not a request is being served on it. Under a flood that keeps opening
//! connections (not one that opens 2,000 and stops), a probe whose answer takes a few hundred
//! ms (a readiness PING on a busy Redis) is closed before its answer is written.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use delayq_dev::{free_port, RedisServer};
use delayq_runtime::{delay_listener, Runtime};

#[delay_listener(topic = "review.health")]
async fn h(_: u32) {}

/// One kubelet-like probe: connect, GET, read the whole answer, within `limit`.
fn probe(addr: SocketAddr, path: &str, limit: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, limit).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(limit)).unwrap();
    s.set_write_timeout(Some(limit)).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) => return Err(format!("read after {:?}: {e}", start.elapsed())),
    }
    let text = String::from_utf8_lossy(&out);
    if text.starts_with("HTTP/1.1 200") {
        Ok(start.elapsed())
    } else {
        Err(format!(
            "answer after {:?}: {:?}",
            start.elapsed(),
            text.chars().take(40).collect::<String>()
        ))
    }
}

/// A readiness probe that waits on a slow `PING` (ready_checks = "redis", Redis busy with
/// another client's 650 ms scripts: PING answers in up to 650 ms, well within the 800 ms
/// timeout, so ready is 200) is mid-request for a few hundred ms; a flood that opens 128
/// connections in that time closes it before it is answered. Without the flood every probe
/// gets its 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_readiness_probe_is_answered_under_a_reconnecting_flood() {
    let server = RedisServer::start();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["review.health"])
        .health(addr)
        .set("ready_checks", "redis")
        .spawn()
        .await
        .unwrap();
    let busy = Arc::new(AtomicBool::new(true));
    let blocker = {
        let busy = busy.clone();
        let mut c = server.connection();
        std::thread::spawn(move || {
            while busy.load(Ordering::SeqCst) {
                let _: () = redis::cmd("EVAL")
                    .arg("local t = redis.call('TIME') local s = t[1]*1000000+t[2] local n = 0 while true do n = n + 1 if n % 1000 == 0 then local u = redis.call('TIME') if (u[1]*1000000+u[2]) - s > 650000 then break end end end return 0")
                    .arg(0)
                    .query(&mut c)
                    .unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let run_probes = || {
        tokio::task::spawn_blocking(move || {
            (0..8)
                .map(|_| {
                    let r = probe(addr, "/health/ready", Duration::from_secs(2));
                    std::thread::sleep(Duration::from_millis(400));
                    r
                })
                .collect::<Vec<_>>()
        })
    };
    let quiet = run_probes().await.unwrap();
    let flooding = Arc::new(AtomicBool::new(true));
    let opened = Arc::new(AtomicUsize::new(0));
    let floods: Vec<_> = (0..2)
        .map(|_| {
            let (flooding, opened) = (flooding.clone(), opened.clone());
            std::thread::spawn(move || {
                let mut held = std::collections::VecDeque::new();
                while flooding.load(Ordering::SeqCst) {
                    if let Ok(s) = TcpStream::connect(addr) {
                        held.push_back(s);
                        opened.fetch_add(1, Ordering::SeqCst);
                    }
                    if held.len() > 250 {
                        held.pop_front();
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let flooded = run_probes().await.unwrap();
    flooding.store(false, Ordering::SeqCst);
    for f in floods {
        f.join().unwrap();
    }
    busy.store(false, Ordering::SeqCst);
    blocker.join().unwrap();
    rt.shutdown().await.unwrap();
    let show = |rs: &[Result<Duration, String>]| {
        rs.iter()
            .map(|r| match r {
                Ok(d) => format!("200 in {d:?}"),
                Err(e) => e.clone(),
            })
            .collect::<Vec<_>>()
    };
    println!(
        "without flood: {:#?}\nflood ({} connections): {:#?}",
        show(&quiet),
        opened.load(Ordering::SeqCst),
        show(&flooded)
    );
    assert!(
        quiet.iter().all(Result::is_ok),
        "baseline: {:#?}",
        show(&quiet)
    );
    let failed = flooded.iter().filter(|r| r.is_err()).count();
    assert_eq!(
        failed,
        0,
        "{failed} of {} readiness probes cut off under the flood: {:#?}",
        flooded.len(),
        show(&flooded)
    );
}
