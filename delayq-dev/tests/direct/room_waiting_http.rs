//! The waiting-room example as a visitor meets it: its HTTP API through a real HTTP client,
//! and its page in headless Chromium (Debian's `chromium`; `.ci/run` installs it when
//! missing). The screenshot goes to `target/screenshots/waiting-room.png`;
//! `docs/waiting-room.png` is a copy of one, looked at before it was committed.

use std::process::Command;
use std::time::{Duration, Instant};

use delayq_dev::{
    dump_dom, example_binary, get_json, http_agent, screenshot, screenshots_dir, RedisServer,
    Service,
};

/// The example, running; `url()` is `http://127.0.0.1:PORT/rooms/concert-42/wait`.
fn start(server: &RedisServer, tick_ms: u64) -> Service {
    let mut cmd = Command::new(example_binary("waiting_room"));
    cmd.env("DELAYQ_REDIS_URL", server.url())
        .env("DELAYQ_EXAMPLE_LISTEN", "127.0.0.1:0")
        .env("DELAYQ_EXAMPLE_TICK_MS", tick_ms.to_string())
        .env("RUST_LOG", "error");
    Service::start(cmd)
}

#[test]
fn waiting_room_example_over_http_and_in_a_browser() {
    let server = RedisServer::start();
    let app = start(&server, 250);
    let base = app.url().split("/rooms").next().unwrap().to_string();
    let agent = http_agent();
    let room = format!("{}/rooms/concert-42", base);

    // POST a token: 201 with JSON.
    let mut r = agent.post(&format!("{room}/tokens")).send_empty().unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let body: serde_json::Value = r.body_mut().read_json().unwrap();
    let token = body["token"].as_str().unwrap().to_string();
    assert_eq!(token.len(), 32);

    // Its status: waiting behind the 40 the example seeded (fewer once ticks admit some).
    let (code, s) = get_json(&agent, &format!("{room}/tokens/{token}"));
    assert_eq!(code, 200, "{s}");
    assert_eq!(s["state"], "waiting", "{s}");
    let position = s["position"].as_u64().unwrap();
    assert!((2..=41).contains(&position), "{s}");
    assert_eq!(s["ahead"].as_u64().unwrap(), position - 1);

    // Bad input: 404 JSON, and the service keeps serving.
    for bad in ["nope", "0123456789abcdef0123456789abcdef", "%3Cscript%3E"] {
        let (code, body) = get_json(&agent, &format!("{room}/tokens/{bad}"));
        assert_eq!(code, 404, "{bad}: {body}");
        assert!(body["error"].is_string(), "{body}");
    }
    let (code, _) = get_json(&agent, &format!("{}/rooms/other/tokens/{token}", base));
    assert_eq!(code, 404, "an unknown room");
    let mut page = agent
        .get(&format!(
            "{room}/wait?token=%3C/script%3E%3Cscript%3Ealert(1)%3C/script%3E"
        ))
        .call()
        .unwrap();
    assert_eq!(
        page.status().as_u16(),
        404,
        "a malformed token gets no page"
    );
    let html = page.body_mut().read_to_string().unwrap();
    assert!(!html.contains("<script>alert"), "{html}");

    // The page in a browser shows the place in line; saved for the docs.
    let shot = screenshots_dir().join("waiting-room.png");
    let profile = tempfile::tempdir().unwrap();
    let wait_url = format!("{room}/wait?token={token}");
    screenshot(profile.path(), &wait_url, &shot, (900, 600), 1500);
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
    let dom = dump_dom(profile.path(), &wait_url, 5000);
    let shown: u64 = dom
        .split("id=\"position\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the page shows no place in line:\n{dom}"));
    assert!(
        shown >= 1 && shown <= position,
        "shown {shown}, was {position}"
    );
    assert!(dom.contains("people ahead of you"));

    // Admitted after the ticks ahead of it (2 a tick, every 250 ms): the API says active, and
    // the page sends the visitor on (the server redirects an admitted token; the page's own
    // polling does the same while it is open, seen in the screenshot run).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, s) = get_json(&agent, &format!("{room}/tokens/{token}"));
        if s["state"] == "active" {
            assert!(s["expires_in_seconds"].as_u64().unwrap() > 0);
            break;
        }
        assert!(Instant::now() < deadline, "not admitted in 30 s: {s}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let dom = dump_dom(profile.path(), &wait_url, 5000);
    assert!(
        dom.contains("You're in"),
        "the page did not send the visitor on:\n{dom}"
    );
}
