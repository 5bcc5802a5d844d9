//! The dashboard's flows: the newest listed with their state, one drawn as a graph (an SVG, a
//! box a step coloured by its state, names escaped), its retry and cancel refused as every
//! write is (read-only, unconfirmed) and audited when done. In headless Chromium the section
//! shows the picture (screenshot target/screenshots/dashboard-flow.png).

use std::time::Duration;

use delayq_core::{Flow, OnFailure};
use delayq_dev::{get_json, http_agent, producer, screenshots_dir, DevTools, RedisServer};
use serde_json::Value;

use crate::dashboard_kit::{dashboard, raw};

fn post(addr: &str, path: &str, confirm: bool) -> (u16, Value) {
    let mut headers = vec![("Host", addr), ("Content-Type", "application/json")];
    if confirm {
        headers.push(("X-Delayq-Confirm", "yes"));
    }
    let reply = raw(addr, "POST", path, &headers, "");
    (
        reply.status,
        serde_json::from_str(&reply.body).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_are_listed_drawn_retried_and_cancelled() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let flow = Flow::new()
        .step("fetch <raw>", "dash.fetch", &1)
        .delay(Duration::from_secs(3600))
        .step("thumb", "dash.thumb", &2)
        .delay(Duration::from_secs(3600))
        .step("publish", "dash.publish", &3)
        .after(["fetch <raw>", "thumb"])
        .if_failed("thumb", OnFailure::Ignore)
        .step("notify", "dash.notify", &4)
        .after(["publish"]);
    let id = p.start_flow(flow).await.unwrap();
    let agent = http_agent();

    // Read-only: listed and drawn; writes refused, nothing changed.
    let board = dashboard(&server.url(), "127.0.0.1:0", &[], None);
    let (code, list) = get_json(&agent, &format!("{}/api/flows", board.url()));
    assert_eq!(code, 200);
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["state"], "running");
    let (code, shown) = get_json(&agent, &format!("{}/api/flows/{id}", board.url()));
    assert_eq!(code, 200, "{shown}");
    let svg = shown["svg"].as_str().unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(
        svg.contains("fetch &lt;raw&gt;") && !svg.contains("<raw>"),
        "names are escaped: {svg}"
    );
    assert_eq!(svg.matches("class=\"step\"").count(), 4);
    assert!(svg.contains("data-state=\"sent\"") && svg.contains("data-state=\"waiting\""));
    assert!(
        svg.contains("stroke-dasharray"),
        "the ignored edge is dashed"
    );
    let addr = board.url().trim_start_matches("http://").to_string();
    let (code, _) = post(&addr, &format!("/api/flows/{id}/cancel"), true);
    assert_eq!(code, 403);
    let (code, v) = get_json(&agent, &format!("{}/api/flows/NOSUCH", board.url()));
    assert_eq!(code, 404, "{v}");
    assert_eq!(p.flow(&id).await.unwrap().unwrap().state.name(), "running");
    drop(board);

    // Writes allowed: unconfirmed refused; cancel, then retry, each audited.
    let board = dashboard(&server.url(), "127.0.0.1:0", &["--allow-writes"], None);
    let addr = board.url().trim_start_matches("http://").to_string();
    let (code, _) = post(&addr, &format!("/api/flows/{id}/cancel"), false);
    assert_eq!(code, 400);
    let (code, v) = post(&addr, &format!("/api/flows/{id}/cancel"), true);
    assert_eq!(
        (code, v["outcome"].as_str()),
        (200, Some("cancelled")),
        "{v}"
    );
    assert_eq!(p.counts("dash.fetch").await.unwrap().delayed, 0);
    let (code, v) = post(&addr, &format!("/api/flows/{id}/retry"), true);
    assert_eq!(
        (code, v["outcome"].as_str()),
        (200, Some("retried 4")),
        "{v}"
    );
    let (code, _) = post(&addr, &format!("/api/flows/{id}/sideways"), true);
    assert_eq!(code, 404);

    let mut browser = DevTools::open(&board.url(), (1280, 1400));
    browser.wait_for(
        "document.getElementById('status').textContent.startsWith('updated')",
        Duration::from_secs(10),
    );
    browser.eval(
        "[...document.querySelectorAll('#flows button')].find(b => b.textContent === 'Show').click(); true",
    );
    browser.wait_for(
        "document.querySelectorAll('#flow-shown svg g.step').length === 4",
        Duration::from_secs(10),
    );
    browser.eval("document.getElementById('flow-shown').scrollIntoView(); true");
    browser.capture(&screenshots_dir().join("dashboard-flow.png"));
    let audit: Vec<String> = board
        .later_lines()
        .into_iter()
        .filter(|l| l.starts_with("audit: "))
        .collect();
    for what in [
        format!("flow cancel {id}: cancelled"),
        format!("flow retry {id}: retried 4"),
    ] {
        assert!(
            audit.iter().any(|l| l.contains(&what)),
            "no audit line {what:?} in {audit:#?}"
        );
    }
}
