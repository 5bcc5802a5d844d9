//! A dynamic schedule no runtime produces (none listens on its topic) shows as stalled in
//! `delayq_schedule_stalled{schedule}`, read by any runtime's gauges; it goes back to 0 once
//! its next tick is ahead again. One test per binary: the recorder is process-wide.

use std::net::SocketAddr;
use std::time::Duration;

use delayq_dev::{free_port, producer, redis_ms, scrape_metrics, wait_until, RedisServer};
use delayq_runtime::{delay_listener, Runtime, Schedule};

#[delay_listener(topic = "stall.other")]
async fn other(_msg: u8) {}

fn stalled(scrape: &str, schedule: &str) -> Option<f64> {
    let prefix = format!("delayq_schedule_stalled{{schedule=\"{schedule}\"}} ");
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

fn set_next(server: &RedisServer, at_ms: u64) {
    let _: () = redis::cmd("HSET")
        .arg("delayq:{stall.nobody}:schedule:orphan")
        .arg("next")
        .arg(at_ms)
        .query(&mut server.connection())
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_nobody_produces_shows_as_stalled() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    for name in ["orphan", "fine"] {
        p.upsert_schedule(
            name,
            Schedule::every(Duration::from_secs(1)).unwrap(),
            "stall.nobody",
            &1u8,
        )
        .await
        .unwrap();
    }
    // As it would be two minutes on with nobody producing it.
    set_next(&server, redis_ms(&server) - 120_000);
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["stall.other"])
        .prometheus(addr)
        .gauges_every(Duration::from_millis(500))
        .spawn()
        .await
        .unwrap();
    let mut last = String::new();
    wait_until(Duration::from_secs(10), "orphan reported stalled", || {
        last = scrape_metrics(addr);
        stalled(&last, "orphan") == Some(1.0)
    })
    .await;
    assert_eq!(stalled(&last, "fine"), None, "{last}");
    set_next(&server, redis_ms(&server) + 60_000);
    wait_until(Duration::from_secs(10), "orphan no longer stalled", || {
        stalled(&scrape_metrics(addr), "orphan") == Some(0.0)
    })
    .await;
    rt.shutdown().await.unwrap();
}
