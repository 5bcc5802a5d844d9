//! The order service example as a client and an orchestrator meet it: orders placed, paid
//! and timed out over HTTP, its health and metrics, and one SIGTERM that stops HTTP and the
//! runtime together without losing a timeout.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use delayq_dev::{example_binary, free_port, get_json, http_agent, RedisServer, Service};
use delayq_runtime::Producer;

fn post(agent: &ureq::Agent, url: &str, body: Option<&str>) -> (u16, serde_json::Value) {
    let req = agent.post(url).header("content-type", "application/json");
    let mut r = match body {
        Some(b) => req.send(b),
        None => req.send_empty(),
    }
    .expect("POST");
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

fn state(agent: &ureq::Agent, base: &str, id: &str) -> String {
    let (code, order) = get_json(agent, &format!("{base}/orders/{id}"));
    assert_eq!(code, 200, "{order}");
    order["state"].as_str().unwrap().to_string()
}

#[test]
fn orders_are_paid_or_closed_and_one_sigterm_stops_everything_losing_nothing() {
    let server = RedisServer::start();
    let ops = format!("127.0.0.1:{}", free_port());
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/delayq.toml");
    let service = |ops: &str, pay_within_ms: &str| {
        let mut cmd = Command::new(example_binary("order_service"));
        cmd.env("DELAYQ_REDIS_URL", server.url())
            .env("DELAYQ_CONFIG", &config)
            // The environment wins over the file: the test's own port for health and metrics.
            .env("DELAYQ_HEALTH", ops)
            .env("DELAYQ_PROMETHEUS", ops)
            .env("DELAYQ_LISTENER_ORDER_TIMEOUT_CONCURRENCY", "4")
            .env("DELAYQ_EXAMPLE_LISTEN", "127.0.0.1:0")
            .env("DELAYQ_EXAMPLE_PAY_WITHIN_MS", pay_within_ms)
            .env("RUST_LOG", "warn");
        Service::start(cmd)
    };
    let mut app = service(&ops, "1500");
    let base = app.url();
    let agent = http_agent();
    assert!(
        app.first_line
            .contains(&format!("http://{ops}/health/ready")),
        "{}",
        app.first_line
    );
    let (code, health) = get_json(&agent, &format!("http://{ops}/health/ready"));
    assert_eq!(code, 200, "{health}");

    // Placed and paid: its timeout is cancelled.
    let (code, a) = post(
        &agent,
        &format!("{base}/orders"),
        Some(r#"{"item":"book"}"#),
    );
    assert_eq!(code, 201, "{a}");
    assert_eq!(a["state"], "awaiting_payment");
    let a = a["id"].as_str().unwrap().to_string();
    let (code, paid) = post(&agent, &format!("{base}/orders/{a}/pay"), None);
    assert_eq!(
        (code, paid["state"].as_str()),
        (200, Some("paid")),
        "{paid}"
    );
    // Placed and left: closed after 1.5 s.
    let (code, b) = post(
        &agent,
        &format!("{base}/orders"),
        Some(r#"{"item":"lamp"}"#),
    );
    assert_eq!(code, 201, "{b}");
    let b = b["id"].as_str().unwrap().to_string();
    let placed = Instant::now();
    while state(&agent, &base, &b) != "closed" {
        assert!(
            placed.elapsed() < Duration::from_secs(10),
            "order {b} was not closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = placed.elapsed();
    assert!(took >= Duration::from_millis(1400), "closed after {took:?}");
    println!("the unpaid order was closed {took:?} after it was placed (timeout 1.5 s)");
    assert_eq!(
        state(&agent, &base, &a),
        "paid",
        "the paid order stays paid"
    );
    // Too late to pay; unknown orders and bad input are refused with JSON.
    let (code, body) = post(&agent, &format!("{base}/orders/{b}/pay"), None);
    assert_eq!(code, 409, "{body}");
    assert_eq!(post(&agent, &format!("{base}/orders/999/pay"), None).0, 404);
    assert_eq!(get_json(&agent, &format!("{base}/orders/999")).0, 404);
    let (code, _) = post(&agent, &format!("{base}/orders"), Some(r#"{"item":""}"#));
    assert_eq!(code, 422);
    let (code, _) = post(&agent, &format!("{base}/orders"), Some("not json"));
    assert!(code == 400 || code == 422, "{code}");

    // The metrics: one timeout handled, on the health listener's port. The count is taken
    // when Redis applied the ack, which may come a moment after the handler closed the order:
    // read until it shows (or 5 s pass).
    let read_handled = || {
        let mut r = agent.get(&format!("http://{ops}/metrics")).call().unwrap();
        let metrics = r.body_mut().read_to_string().unwrap();
        metrics
            .lines()
            .find(|l| {
                l.starts_with("delayq_handled_total")
                    && l.contains("order.timeout")
                    && l.contains("\"ok\"")
            })
            .unwrap_or_else(|| panic!("no handled count in {metrics}"))
            .to_string()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut handled = read_handled();
    while handled.ends_with(" 0") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        handled = read_handled();
    }
    assert!(handled.ends_with(" 1"), "{handled}");

    // A third order, then SIGTERM at once: HTTP and the runtime stop together, exit 0.
    let (code, c) = post(&agent, &format!("{base}/orders"), Some(r#"{"item":"pen"}"#));
    assert_eq!(code, 201, "{c}");
    let status = app
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(15))
        .expect("exited within the grace period");
    assert!(status.success(), "{status:?}");
    assert!(
        agent.get(&format!("{base}/orders/1")).call().is_err(),
        "HTTP stopped"
    );
    assert!(
        agent
            .get(&format!("http://{ops}/health/live"))
            .call()
            .is_err(),
        "health stopped"
    );

    // Nothing lost: the third order's timeout waits in Redis for the next process.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let counts = rt.block_on(async {
        let producer = Producer::connect(&server.url())
            .await
            .unwrap()
            .with_namespace("shop")
            .unwrap();
        producer.counts("order.timeout").await.unwrap()
    });
    assert_eq!(
        (counts.delayed, counts.inflight, counts.dead),
        (1, 0, 0),
        "{counts:?}"
    );

    // A second run: the third order's timeout fires there and finds no order of its id. New
    // orders get ids never given before (the old counter gave 1, 2, 3 again, and the old
    // timeout closed the new order 3).
    let c = c["id"].as_str().unwrap().to_string();
    let mut app = service(&format!("127.0.0.1:{}", free_port()), "60000");
    let base = app.url();
    let placed: Vec<String> = (0..3)
        .map(|_| {
            let (code, o) = post(&agent, &format!("{base}/orders"), Some(r#"{"item":"cup"}"#));
            assert_eq!(code, 201, "{o}");
            o["id"].as_str().unwrap().to_string()
        })
        .collect();
    for id in &placed {
        assert!(
            ![&a, &b, &c].contains(&id),
            "order id {id} was given before"
        );
    }
    std::thread::sleep(Duration::from_millis(2_500));
    for id in &placed {
        assert_eq!(state(&agent, &base, id), "awaiting_payment", "order {id}");
    }
    let status = app
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(15))
        .expect("exited within the grace period");
    assert!(status.success(), "{status:?}");
}

/// This process may hold more descriptors than the service it floods.
fn raise_own_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain calls with a valid pointer to a local.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(16_384);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
}

/// 2,000 idle connections on the health port of a service limited to 512 file descriptors:
/// `/health/live` still answers at once, and the service's own HTTP and its listener go on
/// (the old endpoint held every connection: both timed out, a liveness failure).
#[test]
fn a_flood_of_idle_connections_on_the_health_port_stops_nothing() {
    raise_own_file_limit();
    let server = RedisServer::start();
    let ops = format!("127.0.0.1:{}", free_port());
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/delayq.toml");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -n 512 && exec \"$0\"")
        .arg(example_binary("order_service"))
        .env("DELAYQ_REDIS_URL", server.url())
        .env("DELAYQ_CONFIG", &config)
        .env("DELAYQ_HEALTH", &ops)
        .env("DELAYQ_PROMETHEUS", &ops)
        .env("DELAYQ_EXAMPLE_LISTEN", "127.0.0.1:0")
        .env("DELAYQ_EXAMPLE_PAY_WITHIN_MS", "1000")
        .env("RUST_LOG", "error");
    let mut app = Service::start(cmd);
    let base = app.url();
    let addr: std::net::SocketAddr = ops.parse().unwrap();
    let flood: Vec<std::net::TcpStream> = (0..2_000)
        .filter_map(|_| std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(50)).ok())
        .collect();
    println!("{} idle connections open", flood.len());
    // Until the service has taken in what it will (the old endpoint: until its descriptors ran out).
    let fds = || {
        std::fs::read_dir(format!("/proc/{}/fd", app.pid()))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let mut held = fds();
    for _ in 0..30 {
        std::thread::sleep(Duration::from_millis(100));
        let now = fds();
        if now == held {
            break;
        }
        held = now;
    }
    println!("the service holds {held} descriptors");
    assert!(
        flood.len() > 1_100,
        "the flood did not connect: {}",
        flood.len()
    );
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(3)))
        .build()
        .new_agent();
    let asked = Instant::now();
    let (code, live) = get_json(&agent, &format!("http://{ops}/health/live"));
    let took = asked.elapsed();
    println!("/health/live answered {code} in {took:?} under the flood");
    assert_eq!(code, 200, "{live}");
    assert!(took < Duration::from_secs(1), "live took {took:?}");
    // The service's own HTTP and its listener: an order placed now is closed after 1 s.
    let (code, order) = post(&agent, &format!("{base}/orders"), Some(r#"{"item":"mug"}"#));
    assert_eq!(code, 201, "{order}");
    let id = order["id"].as_str().unwrap().to_string();
    let placed = Instant::now();
    while state(&agent, &base, &id) != "closed" {
        assert!(placed.elapsed() < Duration::from_secs(10), "not closed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        get_json(&agent, &format!("http://{ops}/health/ready")).0,
        200
    );
    drop(flood);
    let status = app
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(15))
        .expect("exited within the grace period");
    assert!(status.success(), "{status:?}");
}
