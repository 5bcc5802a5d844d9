//! Any valid id works from every button (issue 50, item 8): a dead letter whose id is `.`,
//! `..`, or holds `/`, `%`, `?`, `#`, spaces or other scripts is found, replayed and purged
//! over the API the page uses (the id in a query or the body, never a path segment that a
//! browser folds), and from the page in headless Chromium; a reply that is not JSON (a
//! proxy's error page) is shown on the page.

use std::time::Duration;

use delayq_dev::{producer, DevTools, RedisServer};
use delayq_runtime::MessageId;

use crate::dashboard_kit::{authority, dashboard, dead_letters, raw};

const ODD: &[&str] = &[
    ".",
    "..",
    "a/b",
    "../../x",
    "50%",
    "%2e%2e",
    "what?x=1",
    "#1",
    "with space",
    "ünï ☃",
    "a\\b",
    "+plus",
    "/",
];

/// `text` as `encodeURIComponent` writes it.
fn component(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'_'
            | b'.'
            | b'!'
            | b'~'
            | b'*'
            | b'\''
            | b'('
            | b')' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_valid_id_is_found_replayed_and_purged_over_the_pages_api() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    dead_letters(&p, "dash.odd", ODD).await;
    dead_letters(&p, "dash.odd2", ODD).await;
    let board = dashboard(&server.url(), "127.0.0.1:0", &["--allow-writes"], None);
    let addr = authority(&board);
    let host = ("Host", addr.as_str());
    let json = ("Content-Type", "application/json");
    let confirm = ("X-Delayq-Confirm", "yes");
    for id in ODD {
        let path = format!("/api/topics/dash.odd/messages?id={}", component(id));
        let found = raw(&addr, "GET", &path, &[host], "");
        assert_eq!(found.status, 200, "{id:?}: {found:?}");
        assert_eq!(
            (found.json()["id"].as_str(), found.json()["place"].as_str()),
            (Some(*id), Some("dead"))
        );
        let body = serde_json::json!({ "id": id }).to_string();
        let replayed = raw(
            &addr,
            "POST",
            "/api/topics/dash.odd/dead-letter/replay",
            &[host, json, confirm],
            &body,
        );
        assert_eq!(replayed.status, 200, "{id:?}: {replayed:?}");
        assert_eq!(replayed.json()["replayed"], 1, "{id:?}: {replayed:?}");
        let purged = raw(
            &addr,
            "POST",
            "/api/topics/dash.odd2/dead-letter/purge",
            &[host, json, confirm],
            &body,
        );
        assert_eq!(purged.json()["purged"], 1, "{id:?}: {purged:?}");
        let m = MessageId::new(*id).unwrap();
        assert!(
            p.dead_letter("dash.odd", &m).await.unwrap().is_none(),
            "{id:?}"
        );
        assert!(
            p.dead_letter("dash.odd2", &m).await.unwrap().is_none(),
            "{id:?}"
        );
    }
    assert_eq!(p.counts("dash.odd").await.unwrap().delayed, ODD.len());
    // What is not there, and bad input: a JSON error that says so.
    let body = r#"{"id": "never-dead"}"#;
    let gone = raw(
        &addr,
        "POST",
        "/api/topics/dash.odd/dead-letter/replay",
        &[host, json, confirm],
        body,
    );
    assert_eq!(gone.status, 404, "{gone:?}");
    assert!(gone.json()["error"].is_string(), "{gone:?}");
    for bad in [
        r#"{"id": ""}"#,
        r#"{"ids": ["x"]}"#,
        "not json",
        r#"{"id": "a\u0007b"}"#,
    ] {
        let r = raw(
            &addr,
            "POST",
            "/api/topics/dash.odd/dead-letter/purge",
            &[host, json, confirm],
            bad,
        );
        assert_eq!(r.status, 400, "{bad}: {r:?}");
        assert!(r.json()["error"].is_string(), "{bad}: {r:?}");
    }
    let no_id = raw(&addr, "GET", "/api/topics/dash.odd/messages", &[host], "");
    assert_eq!(no_id.status, 400, "{no_id:?}");
    // A path the browser folded (`/dead/../replay` became `/replay`): a JSON 404, not an
    // empty one.
    let folded = raw(
        &addr,
        "POST",
        "/api/topics/dash.odd/replay",
        &[host, confirm],
        "",
    );
    assert_eq!(folded.status, 404, "{folded:?}");
    assert!(
        folded.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("/api/topics/dash.odd/replay")),
        "{folded:?}"
    );
}

/// In the page: Replay on `..`, Purge on `.`, Find `a/b`; and a proxy's HTML error page in
/// reply to a button is shown, with its status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_replays_purges_and_finds_dot_ids_and_shows_a_reply_that_is_not_json() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    dead_letters(&p, "dash.dots", &[".", "..", "a/b", "50%"]).await;
    let board = dashboard(&server.url(), "127.0.0.1:0", &["--allow-writes"], None);
    let mut browser = DevTools::open(&board.url(), (1200, 900));
    let row_of = |id: &str| {
        format!(
            "[...document.querySelectorAll('#dead tr')].find(tr => tr.children[1] && tr.children[1].textContent === {})",
            serde_json::json!(id)
        )
    };
    let press = |id: &str, label: &str| {
        format!(
            "window.confirm = () => true; \
             [...({}).querySelectorAll('button')].find(b => b.textContent === '{label}').click(); true",
            row_of(id)
        )
    };
    browser.wait_for(&format!("!!({})", row_of("..")), Duration::from_secs(15));
    let dead = |id: &'static str| {
        let p = p.clone();
        async move {
            let m = MessageId::new(id).unwrap();
            p.dead_letter("dash.dots", &m).await.unwrap().is_some()
        }
    };
    browser.eval(&press("..", "Replay"));
    browser.wait_for(&format!("!({})", row_of("..")), Duration::from_secs(15));
    assert!(!dead("..").await, "`..` was replayed");
    browser.eval(&press(".", "Purge"));
    browser.wait_for(&format!("!({})", row_of(".")), Duration::from_secs(15));
    assert!(!dead(".").await, "`.` was purged");
    let c = p.counts("dash.dots").await.unwrap();
    assert_eq!((c.delayed, c.dead), (1, 2), "{c:?}");
    // Find `..` (replayed: it is due now) and `a/b` (still dead) with the form.
    for (id, says) in [("..", "delayed"), ("a/b", "dead")] {
        browser.eval(&format!(
            "document.getElementById('find-topic').value = 'dash.dots'; \
             document.getElementById('find-id').value = {}; \
             document.getElementById('find-form').requestSubmit(); true",
            serde_json::json!(id)
        ));
        browser.wait_for(
            &format!(
                "document.getElementById('found').innerText.includes('Where\\t{says}') && \
                 document.getElementById('found').innerText.includes({})",
                serde_json::json!(format!("Id\t{id}"))
            ),
            Duration::from_secs(10),
        );
    }
    // A reverse proxy's error page in reply to Replay: the page says what came back.
    browser.eval(
        "const plain = window.fetch; \
         window.fetch = (path, opts) => opts && opts.method === 'POST' \
           ? Promise.resolve(new Response('<html><body><h1>502 Bad Gateway</h1></body></html>', \
               { status: 502, statusText: 'Bad Gateway', headers: { 'Content-Type': 'text/html' } })) \
           : plain(path, opts); true",
    );
    browser.eval(&press("a/b", "Replay"));
    browser.wait_for(
        "document.getElementById('notice').innerText.includes('502') && \
         document.getElementById('notice').innerText.includes('Bad Gateway')",
        Duration::from_secs(10),
    );
    assert!(dead("a/b").await, "nothing reached the dashboard");
}
