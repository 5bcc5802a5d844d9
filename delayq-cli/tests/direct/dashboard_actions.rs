//! The dashboard's newer writes: run a schedule now, suspend and resume it, send a test
//! message, replay or purge dead letters by selection. Over raw HTTP, each is refused without
//! the token, unconfirmed, from another site, or on a read-only dashboard, and changes nothing
//! then; allowed, each does what it says and leaves an audit line. In headless Chromium, the
//! buttons and the form do the same (screenshots to target/screenshots/dashboard-action*.png:
//! two dead letters ticked, a schedule suspended, a test message sent, the two replayed).

use std::time::Duration;

use delayq_core::protocol::{queue, NackOutcome};
use delayq_dev::{producer, screenshots_dir, DevTools, RedisServer, Service};
use delayq_runtime::{MessageId, Producer, Schedule, SendOptions};
use serde_json::{json, Value};

const TOKEN: &str = "s3cret-token-0123456789";

fn dashboard(url: &str, extra: &[&str], token: Option<&str>) -> Service {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_delayq"));
    cmd.args(["--redis-url", url, "dashboard", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("DELAYQ_NAMESPACE")
        .env_remove("DELAYQ_DASHBOARD_TOKEN");
    if let Some(t) = token {
        cmd.env("DELAYQ_DASHBOARD_TOKEN", t);
    }
    Service::start(cmd)
}

/// One request as written: the status and the body as JSON (`null` when it is not).
fn http(base: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let addr = base.trim_start_matches("http://");
    let mut all = vec![("Host", addr), ("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    let reply = crate::dashboard_kit::raw(addr, "POST", path, &all, body);
    (
        reply.status,
        serde_json::from_str(&reply.body).unwrap_or(Value::Null),
    )
}

/// `n` dead letters `d-0`… on `topic`.
async fn dead_letters(p: &Producer, topic: &str, n: usize) {
    for i in 0..n {
        let o = SendOptions::new().id(format!("d-{i}")).max_attempts(1);
        p.send_with(topic, &json!({"n": i}), o).await.unwrap();
    }
    let q = queue(p, topic).unwrap();
    for c in q
        .claim_due(n, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed
    {
        let out = q.nack(&c.id, c.token(), Duration::ZERO, "boom", 16, None);
        assert_eq!(out.await.unwrap(), NackOutcome::Dead);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_write_is_refused_like_the_others_then_does_what_it_says() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.upsert_schedule(
        "dash.nightly",
        Schedule::cron("0 3 * * *").unwrap(),
        "dash.jobs",
        &json!({"job": 1}),
    )
    .await
    .unwrap();
    dead_letters(&p, "dash.pay", 4).await;
    let board = dashboard(&server.url(), &["--allow-writes"], Some(TOKEN));
    let read_only = dashboard(&server.url(), &[], Some(TOKEN));
    let bearer = format!("Bearer {TOKEN}");
    let (auth, confirm) = (
        ("Authorization", bearer.as_str()),
        ("X-Delayq-Confirm", "yes"),
    );
    let writes = [
        ("/api/schedules/dash.nightly/run", ""),
        ("/api/schedules/dash.nightly/suspend", ""),
        ("/api/topics/dash.pay/send", r#"{"payload": {"x": 1}}"#),
        (
            "/api/topics/dash.pay/dead-selected/replay",
            r#"{"ids": ["d-0"]}"#,
        ),
        (
            "/api/topics/dash.pay/dead-selected/purge",
            r#"{"ids": ["d-0"]}"#,
        ),
    ];
    for (path, body) in writes {
        let base = board.url();
        assert_eq!(
            http(&base, path, &[confirm], body).0,
            401,
            "{path} without the token"
        );
        assert_eq!(
            http(&base, path, &[auth], body).0,
            400,
            "{path} unconfirmed"
        );
        for origin in ["http://evil.example", "null"] {
            let (code, _) = http(&base, path, &[auth, confirm, ("Origin", origin)], body);
            assert_eq!(code, 403, "{path} from {origin}");
        }
        let (code, _) = http(
            &base,
            path,
            &[auth, confirm, ("Sec-Fetch-Site", "cross-site")],
            body,
        );
        assert_eq!(code, 403, "{path} cross-site");
        assert_eq!(
            http(&read_only.url(), path, &[auth, confirm], body).0,
            403,
            "{path} read-only"
        );
    }
    // Nothing changed.
    assert!(!p.schedule("dash.nightly").await.unwrap().unwrap().suspended);
    assert_eq!(p.counts("dash.jobs").await.unwrap().delayed, 0);
    let c = p.counts("dash.pay").await.unwrap();
    assert_eq!((c.delayed, c.dead), (0, 4), "{c:?}");
    // Each refusal is an audit line of its own (dashboard_refusals.rs), never a done write's.
    assert!(
        board
            .later_lines()
            .iter()
            .filter(|l| l.starts_with("audit:"))
            .all(|l| l.contains(" refused POST ") || l.contains("refused writes within a minute")),
        "{:?}",
        board.later_lines()
    );

    let ok = |path: &str, body: &str| {
        let (code, v) = http(&board.url(), path, &[auth, confirm], body);
        assert_eq!(code, 200, "{path}: {v}");
        v
    };
    let ran = ok("/api/schedules/dash.nightly/run", "");
    assert!(
        ran["outcome"]
            .as_str()
            .unwrap()
            .starts_with("ran dash.nightly@"),
        "{ran}"
    );
    assert_eq!(
        p.peek("dash.jobs", 0..5).await.unwrap()[0].payload,
        br#"{"job":1}"#
    );
    assert_eq!(
        ok("/api/schedules/dash.nightly/suspend", "")["outcome"],
        "suspended"
    );
    assert!(p.schedule("dash.nightly").await.unwrap().unwrap().suspended);
    assert_eq!(
        ok("/api/schedules/dash.nightly/resume", "")["outcome"],
        "resumed"
    );
    let sent = ok(
        "/api/topics/dash.pay/send",
        r#"{"payload": {"x": 1}, "delay": "5s", "id": "t-1"}"#,
    );
    assert_eq!(
        (&sent["outcome"], &sent["id"]),
        (&json!("created"), &json!("t-1")),
        "{sent}"
    );
    let found = p
        .find("dash.pay", &MessageId::new("t-1").unwrap())
        .await
        .unwrap();
    assert_eq!(found.payload, br#"{"x":1}"#);
    let replayed = ok(
        "/api/topics/dash.pay/dead-selected/replay",
        r#"{"ids": ["d-0", "d-1", "nope"]}"#,
    );
    assert_eq!(replayed, json!({"replayed": 2, "not_dead": ["nope"]}));
    let purged = ok(
        "/api/topics/dash.pay/dead-selected/purge",
        r#"{"ids": ["d-2"]}"#,
    );
    assert_eq!(purged, json!({"purged": 1, "not_dead": []}));
    let c = p.counts("dash.pay").await.unwrap();
    assert_eq!(
        (c.delayed, c.dead),
        (3, 1),
        "t-1, d-0 and d-1 pending; d-3 dead: {c:?}"
    );

    // Bad input: a clear error, nothing changed.
    let too_many =
        json!({ "ids": (0..1_001).map(|i| format!("x{i}")).collect::<Vec<_>>() }).to_string();
    for (path, body, want) in [
        (
            "/api/topics/dash.pay/send",
            r#"{"payload": {"x": 1}, "delay": "soon"}"#,
            400,
        ),
        ("/api/topics/dash.pay/send", r#"{"payload": "#, 400),
        ("/api/topics/dash.pay/send", r#"{"delay": "5s"}"#, 400),
        ("/api/topics/dash.nope/send", r#"{"payload": 1}"#, 404),
        (
            "/api/topics/dash.pay/dead-selected/replay",
            r#"{"ids": []}"#,
            400,
        ),
        ("/api/topics/dash.pay/dead-selected/replay", &too_many, 400),
        (
            "/api/topics/dash.pay/dead-selected/replay",
            r#"{"ids": ["bad id\n"]}"#,
            400,
        ),
        (
            "/api/topics/dash.pay/dead-selected/revive",
            r#"{"ids": ["d-3"]}"#,
            404,
        ),
        ("/api/schedules/dash.nope/run", "", 404),
        ("/api/schedules/dash.nightly/pause", "", 404),
    ] {
        let (code, v) = http(&board.url(), path, &[auth, confirm], body);
        assert_eq!(code, want, "{path} {body}: {v}");
        assert!(v["error"].is_string(), "{path}: {v}");
    }
    let c = p.counts("dash.pay").await.unwrap();
    assert_eq!((c.delayed, c.dead), (3, 1), "{c:?}");

    // An audit line for each write that reached a route.
    let audit: Vec<String> = board
        .later_lines()
        .into_iter()
        .filter(|l| l.starts_with("audit: "))
        .collect();
    for what in [
        "run schedule dash.nightly: ran dash.nightly@",
        "suspend schedule dash.nightly: suspended",
        "resume schedule dash.nightly: resumed",
        "send a test message to dash.pay: created t-1",
        "replay 3 selected dead letters of dash.pay: 2 replayed",
        "purge 1 selected dead letters of dash.pay: 1 purged",
    ] {
        assert!(
            audit
                .iter()
                .any(|l| l.contains("(token)") && l.contains(what)),
            "no audit line for {what:?}: {audit:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_buttons_and_the_form_in_a_browser() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.upsert_schedule(
        "dash.nightly",
        Schedule::cron("0 3 * * *").unwrap(),
        "dash.jobs",
        &json!({"job": 1}),
    )
    .await
    .unwrap();
    dead_letters(&p, "dash.pay", 3).await;
    let board = dashboard(&server.url(), &["--allow-writes"], None);
    let mut browser = DevTools::open(&board.url(), (1280, 1100));
    browser.wait_for(
        "document.getElementById('status').textContent.startsWith('updated')",
        Duration::from_secs(10),
    );
    browser.eval("window.confirm = () => true; window.alert = m => { window.alerted = m; }; true");
    let press = |row_text: &str, label: &str| {
        format!(
            "(() => {{ const tr = [...document.querySelectorAll('tr')].find(tr => [...tr.children].some(td => td.textContent === '{row_text}')); \
               [...tr.querySelectorAll('button')].find(b => b.textContent === '{label}').click(); return true; }})()"
        )
    };
    // Suspend, then Resume, then Run now.
    browser.eval(&press("dash.nightly", "Suspend"));
    browser.wait_for(
        "[...document.querySelectorAll('#schedules td')].some(td => td.textContent === 'suspended')",
        Duration::from_secs(10),
    );
    assert!(p.schedule("dash.nightly").await.unwrap().unwrap().suspended);
    browser.capture(&screenshots_dir().join("dashboard-action-suspended.png"));
    browser.eval(&press("dash.nightly", "Resume"));
    browser.wait_for(
        "[...document.querySelectorAll('#schedules button')].some(b => b.textContent === 'Suspend')",
        Duration::from_secs(10),
    );
    assert!(!p.schedule("dash.nightly").await.unwrap().unwrap().suspended);
    browser.eval(&press("dash.nightly", "Run now"));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while p.counts("dash.jobs").await.unwrap().delayed == 0 {
        assert!(std::time::Instant::now() < deadline, "Run now sent nothing");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The form: a test message with an id and a delay.
    browser.eval(
        "document.getElementById('send-topic').value = 'dash.pay'; \
         document.getElementById('send-payload').value = '{\"order\": 7}'; \
         document.getElementById('send-delay').value = '1h'; \
         document.getElementById('send-id').value = 'test-7'; \
         document.querySelector('#send-form button').click(); true",
    );
    browser.wait_for(
        "document.getElementById('send-result').textContent === 'created test-7'",
        Duration::from_secs(10),
    );
    let f = p
        .find("dash.pay", &MessageId::new("test-7").unwrap())
        .await
        .unwrap();
    assert_eq!(f.payload, br#"{"order":7}"#);
    browser.capture(&screenshots_dir().join("dashboard-action-sent.png"));
    // Not JSON: said on the page, nothing sent.
    browser.eval(
        "document.getElementById('send-payload').value = '{order: 7'; \
         document.querySelector('#send-form button').click(); true",
    );
    browser.wait_for(
        "document.getElementById('send-result').textContent.startsWith('the payload is not JSON')",
        Duration::from_secs(10),
    );
    // Tick two dead letters (the ticks survive the page's refreshes), Replay selected.
    browser.wait_for(
        "document.querySelectorAll('#dead input[type=checkbox]').length === 3",
        Duration::from_secs(10),
    );
    browser.eval(
        "for (const id of ['d-0', 'd-2']) document.querySelector('#dead input[aria-label=\"select ' + id + '\"]').click(); true",
    );
    std::thread::sleep(Duration::from_millis(2_500)); // a refresh redraws the table
    let ticked = browser.eval("[...document.querySelectorAll('#dead input:checked')].map(b => b.getAttribute('aria-label'))");
    assert_eq!(ticked, json!(["select d-0", "select d-2"]));
    browser.capture(&screenshots_dir().join("dashboard-actions.png"));
    browser.eval("[...document.querySelectorAll('#dead button')].find(b => b.textContent === 'Replay selected').click(); true");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while p.counts("dash.pay").await.unwrap().dead != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "Replay selected replayed nothing"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = p.dead_letters("dash.pay", 0..10).await.unwrap();
    assert_eq!(left[0].id.as_str(), "d-1");
    browser.wait_for(
        "document.querySelectorAll('#dead input[type=checkbox]').length === 1",
        Duration::from_secs(10),
    );
    browser.capture(&screenshots_dir().join("dashboard-action-replayed.png"));
    assert!(board
        .later_lines()
        .iter()
        .any(|l| l.contains("replay 2 selected dead letters of dash.pay: 2 replayed")));
}

/// Names from the URL go into the audit log escaped: a line break in one cannot forge a line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_with_a_line_break_cannot_forge_an_audit_line() {
    let server = RedisServer::start();
    let board = dashboard(&server.url(), &["--allow-writes"], None);
    let confirm = ("X-Delayq-Confirm", "yes");
    let forged = "audit:%202030-01-01T00:00:00Z%20127.0.0.1:1%20purge%20every%20dead%20letter%20of%20pay:%2099%20purged";
    let requests = [
        (format!("/api/schedules/x%0A{forged}/run"), String::new()),
        (
            format!("/api/topics/t%0A{forged}/dead-selected/purge"),
            r#"{"ids": ["a"]}"#.to_string(),
        ),
        (
            format!("/api/topics/t%0D%0A{forged}/dead-all/purge"),
            String::new(),
        ),
    ];
    for (path, body) in &requests {
        let (code, v) = http(&board.url(), path, &[confirm], body);
        assert!((400..500).contains(&code), "{path}: {code} {v}");
    }
    std::thread::sleep(Duration::from_millis(300));
    let lines = board.later_lines();
    let audit: Vec<&String> = lines.iter().filter(|l| l.starts_with("audit:")).collect();
    assert_eq!(audit.len(), requests.len(), "{audit:#?}");
    assert!(
        audit
            .iter()
            .all(|l| l.contains("\\n") && !l.starts_with("audit: 2030")),
        "{audit:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("audit: 2030")),
        "a forged line: {lines:#?}"
    );
}
