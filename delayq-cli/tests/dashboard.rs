//! `delayq dashboard` as an operator uses it: its JSON API through a real HTTP client, its page
//! in headless Chromium (a screenshot to `target/screenshots/dashboard.png`; `docs/dashboard.png`
//! is a copy of one, looked at before it was committed), and its Replay button pressed in the
//! browser, which moves a dead letter back.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use delayq_dev::{
    get_json, http_agent, post_json, producer, screenshot, screenshots_dir, wait_until, DevTools,
    RedisServer, Service,
};
use delayq_runtime::{delay_listener, Producer, RoomConfig, Runtime, SendOptions, WaitingRoom};
use serde_json::{json, Value};

#[delay_listener(topic = "dash.payments", max_attempts = 1)]
async fn charge(msg: Value) -> Result<(), String> {
    if msg["card"] == "declined" {
        return Err("card declined".into());
    }
    Ok(())
}

/// `delayq dashboard` on a free loopback port; its URL is on its first line.
fn dashboard(url: &str, extra: &[&str]) -> Service {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_delayq"));
    cmd.args(["--redis-url", url, "dashboard", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("DELAYQ_NAMESPACE");
    Service::start(cmd)
}

/// POSTs a write, confirmed or not.
fn post(agent: &ureq::Agent, url: &str, confirm: bool) -> (u16, Value) {
    let headers: &[(&str, &str)] = if confirm {
        &[("X-Delayq-Confirm", "yes")]
    } else {
        &[]
    };
    post_json(agent, url, headers)
}

/// Sends `payments` to dash.payments (every fifth declined, ids `pay-<i>`) through a
/// runtime, and waits until the declined ones are dead.
async fn payments_with_dead_letters(server: &RedisServer, p: &Producer, payments: u64) {
    let runtime = Runtime::builder()
        .redis_url(server.url())
        .topics(["dash.payments"])
        .spawn()
        .await
        .unwrap();
    for i in 0..payments {
        let card = if i % 5 == 0 { "declined" } else { "ok" };
        let options = SendOptions::new().id(format!("pay-{i}"));
        p.send_with("dash.payments", &json!({"i": i, "card": card}), options)
            .await
            .unwrap();
    }
    let dead = payments.div_ceil(5);
    wait_until(Duration::from_secs(20), "the declined ones dead", || {
        dead_count(server) == dead
    })
    .await;
    // ... and every other one handled (a shutdown would hand a running one back).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let c = p.counts("dash.payments").await.unwrap();
        if (c.delayed, c.inflight) == (0, 0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "payments still pending: {c:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    runtime.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_live_counts_and_replays_from_the_browser() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    payments_with_dead_letters(&server, &p, 20).await;
    for i in 0..7 {
        p.send(
            "dash.reminders",
            &json!({"user": i}),
            Duration::from_secs(3_600),
        )
        .await
        .unwrap();
    }
    p.publish("dash.events", &json!({"kind": "signup"}))
        .await
        .unwrap();
    let room = WaitingRoom::new(&p, "dash.sale", RoomConfig::fixed(1, 1_000)).unwrap();
    for _ in 0..3 {
        room.enter().await.unwrap();
    }
    p.upsert_schedule(
        "dash.nightly",
        delayq_runtime::Schedule::cron("0 3 * * *")
            .unwrap()
            .tz("Europe/Berlin")
            .unwrap(),
        "dash.reminders",
        &json!({"user": "all"}),
    )
    .await
    .unwrap();

    // Flow control shows beside the topic's name: paused, and the rate its listeners announced.
    p.pause("dash.reminders").await.unwrap();
    let rate = delayq_core::config::Rate::parse("100/s").unwrap();
    delayq_core::protocol::queue(&p, "dash.reminders")
        .unwrap()
        .with_flow(delayq_core::protocol::Flow {
            rate: Some(rate),
            ..Default::default()
        })
        .announce_flow()
        .await
        .unwrap();

    let board = dashboard(&server.url(), &["--allow-writes"]);
    let agent = http_agent();

    // The API: live counts per topic, streams and rooms.
    let (code, o) = get_json(&agent, &format!("{}/api/overview", board.url()));
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["writes"], true);
    let topic = |name: &str| {
        o["topics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["topic"] == name)
            .unwrap_or_else(|| panic!("no {name} in {o}"))
            .clone()
    };
    let pay = topic("dash.payments");
    assert_eq!(
        (pay["delayed"].as_u64(), pay["dead"].as_u64()),
        (Some(0), Some(4)),
        "{pay}"
    );
    assert_eq!(pay["last_minute"]["ok"], 16, "{pay}");
    assert_eq!(pay["last_minute"]["dead"], 4, "{pay}");
    assert_eq!(topic("dash.reminders")["delayed"], 7);
    assert_eq!(o["streams"][0]["stream"], "dash.events");
    assert_eq!(o["streams"][0]["length"], 1);
    assert_eq!(
        o["rooms"],
        json!([{"room": "dash.sale", "waiting": 3, "active": 0}])
    );
    let nightly = &o["schedules"][0];
    assert_eq!(
        (&nightly["schedule"], &nightly["spec"], &nightly["tz"]),
        (
            &json!("dash.nightly"),
            &json!("0 3 * * *"),
            &json!("Europe/Berlin")
        ),
        "{o}"
    );
    let (code, dead) = get_json(
        &agent,
        &format!("{}/api/topics/dash.payments/dead", board.url()),
    );
    assert_eq!(code, 200);
    assert_eq!(dead.as_array().unwrap().len(), 4);
    let page = agent
        .get(&board.url())
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(page.contains("<title>delayq dashboard</title>"));

    // Writes: refused without the confirmation header, and on a read-only dashboard.
    let replay_url = format!("{}/api/topics/dash.payments/dead/pay-0/replay", board.url());
    let (code, body) = post(&agent, &replay_url, false);
    assert_eq!(code, 400, "{body}");
    let read_only = dashboard(&server.url(), &[]);
    let (code, body) = post(
        &agent,
        &format!(
            "{}/api/topics/dash.payments/dead/pay-0/replay",
            read_only.url()
        ),
        true,
    );
    assert_eq!(code, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("--allow-writes"));
    let (code, _) = post(
        &agent,
        &format!("{}/api/topics/dash.payments/dead/nope/replay", board.url()),
        true,
    );
    assert_eq!(code, 404);
    assert_eq!(
        p.counts("dash.payments").await.unwrap().dead,
        4,
        "nothing moved yet"
    );

    // The page in a browser: the counts, and the dead letters with their buttons.
    let shot = screenshots_dir().join("dashboard.png");
    let profile = tempfile::tempdir().unwrap();
    screenshot(profile.path(), &board.url(), &shot, (1200, 900), 3000);
    assert!(std::fs::metadata(&shot).unwrap().len() > 20_000);
    // The same page, driven over DevTools: what it shows once its first refresh is in.
    let mut browser = DevTools::open(&board.url(), (1200, 900));
    browser.wait_for(
        "document.getElementById('status').textContent.startsWith('updated')",
        Duration::from_secs(10),
    );
    let text = browser.eval("document.body.innerText");
    let text = text.as_str().unwrap();
    for shown in [
        "dash.payments",
        "dash.reminders (paused, 100/s burst 10)",
        "dash.events",
        "dash.sale",
        "dash.nightly",
        "0 3 * * *",
        "Europe/Berlin",
        "card declined",
        "writes allowed",
    ] {
        assert!(
            text.contains(shown),
            "the page does not show {shown:?}:\n{text}"
        );
    }
    let payments_row = browser.eval(
        "[...document.querySelectorAll('#topics tr')] \
           .find(tr => tr.firstChild.textContent === 'dash.payments') \
           .innerText.split('\\t')",
    );
    // Topic, delayed, in flight, dead, next due, handled, retried, died / min, rate.
    assert_eq!(payments_row[0], "dash.payments");
    assert_eq!(
        (payments_row[1].as_str(), payments_row[3].as_str()),
        (Some("0"), Some("4")),
        "{payments_row}"
    );
    assert_eq!(
        (payments_row[5].as_str(), payments_row[7].as_str()),
        (Some("16"), Some("4")),
        "{payments_row}"
    );

    // Press Replay on pay-5 in the browser (confirm() answered yes): it is due again.
    browser.wait_for(
        "[...document.querySelectorAll('#dead td')].some(td => td.textContent === 'pay-5')",
        Duration::from_secs(10),
    );
    let clicked = browser.eval(
        "window.confirm = () => true; \
         const pay5 = [...document.querySelectorAll('#dead tr')] \
           .find(tr => tr.children[1] && tr.children[1].textContent === 'pay-5'); \
         [...pay5.querySelectorAll('button')].find(b => b.textContent === 'Replay').click(); true",
    );
    assert_eq!(clicked, true);
    wait_until(Duration::from_secs(10), "pay-5 replayed", || {
        dead_count(&server) == 3
    })
    .await;
    let id = delayq_runtime::MessageId::new("pay-5").unwrap();
    assert!(p.dead_letter("dash.payments", &id).await.unwrap().is_none());
    assert_eq!(p.peek("dash.payments", 0..10).await.unwrap()[0].id, id);
    // The page shows the new count on its next refresh.
    browser.wait_for(
        "[...document.querySelectorAll('#topics td')].some(td => td.textContent === '3')",
        Duration::from_secs(10),
    );

    // Press Pause on dash.payments (confirmed): every process stops claiming it; the row then
    // offers Resume.
    let clicked = browser.eval(
        "window.confirm = () => true; \
         const payments = [...document.querySelectorAll('#topics tr')] \
           .find(tr => tr.firstChild.textContent === 'dash.payments'); \
         [...payments.querySelectorAll('button')].find(b => b.textContent === 'Pause').click(); true",
    );
    assert_eq!(clicked, true);
    let paused = || async { p.is_paused("dash.payments").await.unwrap() };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !paused().await && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(paused().await, "the Pause button did not pause the topic");
    browser.wait_for(
        "[...document.querySelectorAll('#topics button')].some(b => b.textContent === 'Resume')",
        Duration::from_secs(10),
    );
    let shot = screenshots_dir().join("dashboard-paused.png");
    screenshot(profile.path(), &board.url(), &shot, (1200, 600), 3000);
    // Each write is an audit line on the dashboard's stdout: when, from where, what, result.
    let audit = board.later_lines();
    for what in [
        "replay dead letter pay-5 of dash.payments: 1 replayed",
        "pause dash.payments: paused",
    ] {
        assert!(
            audit.iter().any(|l| l.starts_with("audit: 20")
                && l.contains("127.0.0.1:")
                && l.ends_with(what)),
            "no audit line for {what:?}: {audit:?}"
        );
    }
    // Refused like every write: read-only, unconfirmed; an unknown topic or action is 404.
    let flow =
        |base: &str, topic: &str, action: &str| format!("{base}/api/topics/{topic}/flow/{action}");
    let (code, body) = post(
        &agent,
        &flow(&read_only.url(), "dash.payments", "resume"),
        true,
    );
    assert_eq!(code, 403, "{body}");
    let (code, body) = post(
        &agent,
        &flow(&board.url(), "dash.payments", "resume"),
        false,
    );
    assert_eq!(code, 400, "{body}");
    let (code, _) = post(&agent, &flow(&board.url(), "dash.nope", "pause"), true);
    assert_eq!(code, 404);
    let (code, _) = post(&agent, &flow(&board.url(), "dash.payments", "stop"), true);
    assert_eq!(code, 404);
    assert!(paused().await, "a refused resume changed nothing");
    let (code, body) = post(&agent, &flow(&board.url(), "dash.payments", "resume"), true);
    assert_eq!((code, &body["outcome"]), (200, &json!("resumed")), "{body}");
    assert!(!paused().await);
}

/// Dead letters of dash.payments, read directly from Redis.
fn dead_count(server: &RedisServer) -> u64 {
    redis::cmd("ZCARD")
        .arg("delayq:{dash.payments}:dead")
        .query(&mut server.connection())
        .unwrap()
}

#[test]
fn dashboard_warns_when_bound_beyond_loopback() {
    let server = RedisServer::start();
    let mut child = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--redis-url",
            &server.url(),
            "dashboard",
            "--listen",
            "0.0.0.0:0",
        ])
        .env_remove("DELAYQ_NAMESPACE")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start delayq dashboard");
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        line.contains("warning") && line.contains("not loopback"),
        "{line:?}"
    );
}

/// One HTTP/1.1 request written as it is (so `Host`, `Origin` and the rest are exactly what a
/// browser on another site would send): the status and the body.
fn raw_http(base: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the dashboard");
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n");
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {reply:?}"));
    let body = reply
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// DNS rebinding and cross-site writes: a page on another site that points its own name at
/// 127.0.0.1 sends its name in `Host`, and a write from it carries its `Origin`; without the
/// token no API call is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_refuses_foreign_hosts_cross_site_writes_and_calls_without_its_token() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    payments_with_dead_letters(&server, &p, 6).await; // pay-0 and pay-5 die

    let token = "s3cret-token-0123456789";
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_delayq"));
    cmd.args([
        "--redis-url",
        &server.url(),
        "dashboard",
        "--listen",
        "127.0.0.1:0",
    ])
    .args(["--allow-writes", "--allow-host", "dash.internal"])
    .env("DELAYQ_DASHBOARD_TOKEN", token)
    .env_remove("DELAYQ_NAMESPACE");
    let board = Service::start(cmd);
    let base = board.url();
    let own = base.trim_start_matches("http://").to_string();
    let port = own.rsplit(':').next().unwrap().to_string();
    let bearer = format!("Bearer {token}");
    let auth = ("Authorization", bearer.as_str());

    // A rebound name is refused, for the page and the API, even with the token.
    let evil = format!("evil.example:{port}");
    for path in ["/", "/api/overview"] {
        let (code, body) = raw_http(&base, "GET", path, &[("Host", &evil), auth]);
        assert_eq!(code, 421, "GET {path} with Host {evil}: {body}");
    }
    let (code, _) = raw_http(&base, "GET", "/api/overview", &[auth]);
    assert_eq!(code, 421, "no Host at all");
    // The listen address, localhost and an --allow-host name are this dashboard.
    for host in [
        own.clone(),
        format!("localhost:{port}"),
        format!("dash.internal:{port}"),
    ] {
        let (code, body) = raw_http(&base, "GET", "/api/overview", &[("Host", &host), auth]);
        assert_eq!(code, 200, "Host {host}: {body}");
        assert!(body.contains("dash.payments"), "{body}");
    }
    // No token, a wrong one: nothing.
    let (code, body) = raw_http(&base, "GET", "/api/overview", &[("Host", &own)]);
    assert_eq!(code, 401, "{body}");
    assert!(!body.contains("dash.payments"), "{body}");
    let wrong = format!("Bearer {}x", &token[..token.len() - 1]);
    let (code, _) = raw_http(
        &base,
        "GET",
        "/api/overview",
        &[("Host", &own), ("Authorization", &wrong)],
    );
    assert_eq!(code, 401);
    // The page itself carries no data and loads without the token (it asks for it).
    let (code, page) = raw_http(&base, "GET", "/", &[("Host", &own)]);
    assert_eq!(code, 200);
    assert!(page.contains("token-form"), "the page has the token form");

    // A write from another site is refused, whatever headers its script sets.
    let purge = "/api/topics/dash.payments/dead-all/purge";
    let confirm = ("X-Delayq-Confirm", "yes");
    let cross = [("Origin", "http://evil.example"), ("Origin", "null")];
    for origin in cross {
        let (code, body) = raw_http(
            &base,
            "POST",
            purge,
            &[("Host", &own), auth, confirm, origin],
        );
        assert_eq!(code, 403, "{origin:?}: {body}");
    }
    let (code, body) = raw_http(
        &base,
        "POST",
        purge,
        &[
            ("Host", &own),
            auth,
            confirm,
            ("Sec-Fetch-Site", "cross-site"),
        ],
    );
    assert_eq!(code, 403, "{body}");
    let (code, _) = raw_http(&base, "POST", purge, &[("Host", &evil), auth, confirm]);
    assert_eq!(code, 421);
    assert_eq!(dead_count(&server), 2, "nothing was purged");
    // From its own page: done.
    let own_origin = format!("http://{own}");
    let (code, body) = raw_http(
        &base,
        "POST",
        purge,
        &[
            ("Host", &own),
            auth,
            confirm,
            ("Origin", &own_origin),
            ("Sec-Fetch-Site", "same-origin"),
        ],
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(dead_count(&server), 0);
}

#[test]
fn dashboard_refuses_a_short_token_and_a_bad_host_name() {
    let server = RedisServer::start();
    for (args, env_token, says) in [
        (vec![], Some("short"), "too short"),
        (vec!["--allow-host", "a/b"], None, "not a host name"),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_delayq"));
        cmd.args([
            "--redis-url",
            &server.url(),
            "dashboard",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(&args)
        .env_remove("DELAYQ_NAMESPACE")
        .env_remove("DELAYQ_DASHBOARD_TOKEN");
        if let Some(t) = env_token {
            cmd.env("DELAYQ_DASHBOARD_TOKEN", t);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{stderr}");
    }
}

/// A poll of the page never starts while the last one runs: with Redis' replies held back
/// (each overview then takes longer than the 2 s between polls), at most one `/api/overview`
/// is in flight at any time.
#[test]
fn dashboard_polls_never_overlap() {
    let server = RedisServer::start();
    let proxy = delayq_dev::BlackholeProxy::start(server.port());
    let board = dashboard(&proxy.url(), &[]);
    let mut browser = DevTools::open(&board.url(), (1200, 900));
    browser.wait_for(
        "document.getElementById('status').textContent.startsWith('updated')",
        Duration::from_secs(10),
    );
    // Counts the overviews in flight, from now on.
    browser.eval(
        "window.inFlight = 0; window.mostInFlight = 0; window.overviews = 0; \
         const plain = window.fetch; \
         window.fetch = (path, opts) => { \
           const overview = String(path).includes('/api/overview'); \
           if (overview) { inFlight++; overviews++; mostInFlight = Math.max(mostInFlight, inFlight); } \
           return plain(path, opts).finally(() => { if (overview) inFlight--; }); \
         }; true",
    );
    proxy.delay_replies(Duration::from_millis(1_500));
    std::thread::sleep(Duration::from_secs(9));
    let most = browser.eval("window.mostInFlight");
    let overviews = browser.eval("window.overviews");
    assert!(
        overviews.as_u64().unwrap() >= 1,
        "no poll in 9 s: {overviews}"
    );
    assert_eq!(
        most.as_u64(),
        Some(1),
        "overviews in flight at once (of {overviews})"
    );
}

/// An audit line to a stdout nobody reads any more (piped into a pager that quit) does not
/// stop the write it records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_succeeds_when_stdout_is_closed() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send("dash.closed", &1u8, Duration::from_secs(60))
        .await
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--redis-url",
            &server.url(),
            "dashboard",
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--allow-writes")
        .env_remove("DELAYQ_NAMESPACE")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    {
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut first).unwrap();
    } // stdout's reading end is closed here
    let base = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let agent = http_agent();
    let (code, body) = post(
        &agent,
        &format!("{base}/api/topics/dash.closed/flow/pause"),
        true,
    );
    let (again, _) = get_json(&agent, &format!("{base}/api/overview"));
    delayq_dev::signal_pid(child.id(), libc::SIGINT);
    let _ = child.wait();
    assert_eq!((code, &body["outcome"]), (200, &json!("paused")), "{body}");
    assert!(p.is_paused("dash.closed").await.unwrap());
    assert_eq!(again, 200, "the dashboard still answers");
}
