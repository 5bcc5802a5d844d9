//! Not part of the suite (`--ignored`: it takes five minutes, longer than the rest of the
//! suite): ten idle listeners' cost over five minutes, the history's writes included — the
//! commands the process sends (MONITOR lines not run by a script), at most 0.2 a second.
//! (Before the histories: 60 commands in 305 s, 0.197/s; see BENCHMARKS.md.)

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use delayq_dev::{runtime, sleep_ms, RedisServer};

delayq_dev::idle_listeners!(
    IDLE_TOPICS:
    idle0 = "hist.idle.0",
    idle1 = "hist.idle.1",
    idle2 = "hist.idle.2",
    idle3 = "hist.idle.3",
    idle4 = "hist.idle.4",
    idle5 = "hist.idle.5",
    idle6 = "hist.idle.6",
    idle7 = "hist.idle.7",
    idle8 = "hist.idle.8",
    idle9 = "hist.idle.9"
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn ten_idle_listeners_over_five_minutes_with_history_writes() {
    let server = RedisServer::start();
    let rt = runtime(&server, IDLE_TOPICS).await;
    sleep_ms(1_000).await;
    let window = Duration::from_secs(305);
    let port = server.port();
    let lines = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"MONITOR\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut out = Vec::new();
        let end = Instant::now() + window;
        let mut buf = [0u8; 65536];
        while Instant::now() < end {
            if let Ok(n) = s.read(&mut buf) {
                out.extend_from_slice(&buf[..n]);
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    })
    .await
    .unwrap();
    let top: Vec<&str> = lines
        .lines()
        .filter(|l| l.starts_with('+') && !l.contains(" lua]") && l.contains('"'))
        .collect();
    let mut by_name = std::collections::BTreeMap::<String, u64>::new();
    for l in &top {
        let name = l.split('"').nth(1).unwrap_or("").to_lowercase();
        *by_name.entry(name).or_default() += 1;
    }
    let n = top.len() as f64;
    println!(
        "{} commands sent in {} s ({:.3}/s): {by_name:?}",
        top.len(),
        window.as_secs(),
        n / window.as_secs_f64()
    );
    assert!(n / window.as_secs_f64() <= 0.2, "{by_name:?}");
    rt.shutdown().await.unwrap();
}
