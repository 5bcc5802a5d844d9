//! Health for orchestrators: with `ready_checks = "redis,listeners"`, `/health/ready` answers
//! 503 while Redis is stopped and 200 again; by default readiness leaves Redis out (a blip does
//! not take every replica out of its load balancer)
//! after, `/health/live` stays 200, both within a probe's 1 s timeout when Redis is frozen and
//! several probes come at once, and both share the Prometheus listener.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use delayq_dev::http_agent;
use delayq_dev::{free_port, RedisServer};
use delayq_runtime::{delay_listener, RedisHealth, Runtime};

static HANDLED: AtomicUsize = AtomicUsize::new(0);

#[delay_listener(topic = "health.orders")]
async fn orders(_: u32) {
    HANDLED.fetch_add(1, Ordering::SeqCst);
}

/// GET `path`: the status and the body.
async fn get(base: &str, path: &str) -> (u16, String) {
    let url = format!("{base}{path}");
    tokio::task::spawn_blocking(move || {
        let mut r = http_agent().get(&url).call().expect("GET");
        let status = r.status().as_u16();
        (status, r.body_mut().read_to_string().expect("a body"))
    })
    .await
    .unwrap()
}

/// Polls `path` until it answers `status`; how long that took.
async fn until(base: &str, path: &str, status: u16, within: Duration) -> (Duration, String) {
    let start = Instant::now();
    loop {
        let (s, body) = get(base, path).await;
        if s == status {
            return (start.elapsed(), body);
        }
        assert!(
            start.elapsed() < within,
            "{path} still answers {s}, not {status}, after {within:?}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ready_is_503_while_redis_is_stopped_and_200_after() {
    let mut server = RedisServer::start();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let handle = Runtime::builder()
        .redis_url(server.url())
        .prometheus(addr)
        .health(addr)
        .set("ready_checks", "redis,listeners")
        .spawn()
        .await
        .expect("spawn");
    let base = format!("http://{addr}");

    let (status, body) = get(&base, "/health/ready").await;
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["ready"], true);
    assert_eq!(json["redis"]["state"], "up");
    assert_eq!(json["listeners"][0]["name"], "health.orders");
    assert_eq!(json["listeners"][0]["state"], "running");
    // The same listener serves the metrics.
    let (status, metrics) = get(&base, "/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("delayq_pending"), "{metrics}");
    // Nothing else: no other path, no other method.
    assert_eq!(get(&base, "/health").await.0, 404);
    let post = tokio::task::spawn_blocking({
        let url = format!("{base}/health/ready");
        move || {
            http_agent()
                .post(&url)
                .send_empty()
                .expect("POST")
                .status()
                .as_u16()
        }
    })
    .await
    .unwrap();
    assert_eq!(post, 405);

    server.stop();
    let stopped_at = Instant::now();
    let (took, body) = until(&base, "/health/ready", 503, Duration::from_secs(10)).await;
    println!("ready went 503 {took:?} after Redis stopped");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["ready"], false);
    assert_eq!(json["redis"]["state"], "down", "{body}");
    assert!(json["redis"]["since"].as_u64().unwrap() > 0);
    let (status, body) = get(&base, "/health/live").await;
    assert_eq!(
        status, 200,
        "the runtime's tasks live on while Redis is gone: {body}"
    );
    let health = handle.health().await;
    assert!(
        matches!(health.redis, RedisHealth::Down { .. }),
        "{health:?}"
    );
    assert!(stopped_at.elapsed() < Duration::from_secs(30));

    server.restart();
    let (took, body) = until(&base, "/health/ready", 200, Duration::from_secs(20)).await;
    println!("ready went 200 {took:?} after Redis restarted");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["redis"]["state"], "up");
    assert_eq!(json["listeners"][0]["state"], "running", "{body}");
    // And it works again: a message sent now is handled.
    handle
        .producer()
        .send("health.orders", &1u32, Duration::ZERO)
        .await
        .unwrap();
    let sent = Instant::now();
    while HANDLED.load(Ordering::SeqCst) == 0 {
        assert!(sent.elapsed() < Duration::from_secs(10), "not handled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Frozen (SIGSTOP: connections open, nothing answers), and probed as Kubernetes does,
    // with a 1 s timeout, by several probes at once: readiness answers 503 within it (the
    // checks share one PING), and liveness answers 200 without asking Redis at all.
    server.freeze();
    // Checks within 250 ms share one PING: let the last answer from before the freeze age.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let probes: Vec<_> = (0..8)
        .map(|i| {
            let path = if i % 2 == 0 {
                "/health/ready"
            } else {
                "/health/live"
            };
            let base = base.clone();
            tokio::spawn(async move {
                let asked = Instant::now();
                let (status, body) = get(&base, path).await;
                (path, status, asked.elapsed(), body)
            })
        })
        .collect();
    for probe in probes {
        let (path, status, took, body) = probe.await.unwrap();
        let expected = if path == "/health/live" { 200 } else { 503 };
        assert_eq!(status, expected, "{path} while Redis is frozen: {body}");
        assert!(
            took < Duration::from_secs(1),
            "{path} answered after {took:?}: a probe with Kubernetes' 1 s timeout fails"
        );
        println!("{path} answered {status} in {took:?} while Redis was frozen");
    }
    server.thaw();
    until(&base, "/health/ready", 200, Duration::from_secs(20)).await;

    handle.shutdown().await.unwrap();
    // The endpoint closes with the runtime.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let url = format!("{base}/health/live");
    let after = tokio::task::spawn_blocking(move || http_agent().get(&url).call().is_err())
        .await
        .unwrap();
    assert!(after, "the health endpoint still answers after shutdown");
}

static ORPHANS: AtomicUsize = AtomicUsize::new(0);

#[delay_listener(topic = "health.orphans")]
async fn orphans(_: u32) {
    ORPHANS.fetch_add(1, Ordering::SeqCst);
}

/// Start is all or nothing: when the health port is taken, or a waiting room cannot be set
/// up, `spawn` fails and nothing keeps consuming behind it (the old spawn started bosses
/// first: "3 s after the failed spawn: the handler ran 5 times").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_leaves_nothing_running() {
    let server = RedisServer::start();
    let p = delayq_dev::producer(&server).await;
    for i in 0..5u32 {
        p.send("health.orphans", &i, Duration::ZERO).await.unwrap();
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let err = Runtime::builder()
        .redis_url(server.url())
        .topics(["health.orphans"])
        .health(taken.local_addr().unwrap())
        .spawn()
        .await
        .map(|_| ())
        .unwrap_err();
    println!("refused: {err}");
    let err = Runtime::builder()
        .redis_url(server.url())
        .topics(["health.orphans"])
        .waiting_room("no spaces allowed", delayq_runtime::RoomConfig::default())
        .spawn()
        .await
        .map(|_| ())
        .unwrap_err();
    println!("refused: {err}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        ORPHANS.load(Ordering::SeqCst),
        0,
        "a failed spawn left consumers running"
    );
    // A start that succeeds handles them.
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["health.orphans"])
        .spawn()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while ORPHANS.load(Ordering::SeqCst) < 5 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(ORPHANS.load(Ordering::SeqCst), 5);
    rt.shutdown().await.unwrap();
}

/// By default (`ready_checks = "none"`) a stopped Redis leaves `/health/ready` at 200 — the
/// body still says Redis is down — and a probe asks Redis nothing; a stopping runtime is not
/// ready. (The old readiness failed on one 800 ms `PING` timeout, taking every replica of a
/// service out of its load balancer for a Redis blip.)
#[tokio::test(flavor = "multi_thread")]
async fn by_default_readiness_leaves_redis_out() {
    let mut server = RedisServer::start();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let handle = Runtime::builder()
        .redis_url(server.url())
        .topics(["health.orders"])
        .health(addr)
        .spawn()
        .await
        .expect("spawn");
    assert_eq!(
        handle
            .config()
            .runtime("ready_checks")
            .map(|s| s.value.to_string()),
        Some("none".to_string())
    );
    let base = format!("http://{addr}");
    assert_eq!(get(&base, "/health/ready").await.0, 200);
    server.stop();
    let stopped = Instant::now();
    while stopped.elapsed() < Duration::from_secs(3) {
        let (status, body) = get(&base, "/health/ready").await;
        assert_eq!(
            status, 200,
            "ready went {status} with Redis stopped: {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    server.restart();
    handle.shutdown().await.unwrap();
}
