//! What Redis holds is not always what delayq wrote: a registry entry that is not a valid
//! name, a stream name that holds a string, an error text full of terminal escapes. The CLI
//! and the dashboard show the rest and an error row for what cannot be read, and never let a
//! message's contents drive the operator's terminal.

use std::process::Command;
use std::time::Duration;

use delayq_dev::{get_json, http_agent, producer, wait_until, RedisServer, Service};
use delayq_runtime::{delay_listener, Runtime};
use serde_json::{json, Value};

mod common;
use common::delayq;

/// Sets the terminal's title and clears the screen, if printed raw.
const HOSTILE: &str = "boom \u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}gnp.exe";

#[delay_listener(topic = "cli.escape", max_attempts = 1)]
async fn hostile(_msg: Value) -> Result<(), String> {
    Err(HOSTILE.into())
}

/// No byte that a terminal would obey (C0 but newline, DEL, C1, bidi overrides).
fn assert_inert(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|c| {
            (c.is_control() && *c != '\n')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(bad.is_empty(), "{what} printed {bad:?}:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_escapes_control_characters_from_message_contents_and_keeps_json_exact() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    let runtime = Runtime::builder()
        .redis_url(server.url())
        .topics(["cli.escape"])
        .spawn()
        .await
        .unwrap();
    let id = p
        .send("cli.escape", &json!({"n": 1}), Duration::ZERO)
        .await
        .unwrap();
    wait_until(Duration::from_secs(20), "a dead letter", || {
        let run = delayq(&url, &["--json", "stats", "cli.escape"]);
        serde_json::from_str::<Value>(run.stdout.trim()).is_ok_and(|v| v[0]["dead"] == 1)
    })
    .await;
    runtime.shutdown().await.unwrap();

    for args in [
        vec!["dead", "list", "cli.escape"],
        vec!["dead", "show", "cli.escape", id.as_str()],
        vec!["stats"],
        vec!["topics"],
    ] {
        let run = delayq(&url, &args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert_inert(&format!("delayq {args:?}"), &run.stdout);
        assert_inert(&format!("delayq {args:?} (stderr)"), &run.stderr);
    }
    let shown = delayq(&url, &["dead", "show", "cli.escape", id.as_str()]).stdout;
    assert!(
        shown.contains(r"boom \x1b]0;owned\x07\x1b[2J\u{202e}gnp.exe"),
        "the error is shown, escaped:\n{shown}"
    );
    // --json stays exact: the same text, as JSON encodes it.
    let run = delayq(&url, &["--json", "dead", "show", "cli.escape", id.as_str()]);
    let letter = run.json();
    assert_eq!(letter["last_error"], HOSTILE, "{letter}");
    // A name typed (or pasted) with escapes comes back escaped in the error.
    let run = delayq(&url, &["stats", "x\u{1b}[2Jy"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_inert("the error for a hostile name", &run.stderr);
    assert!(
        run.stderr.contains("[2Jy"),
        "names the topic: {}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_unreadable_registry_entry_is_an_error_row_and_the_rest_is_shown() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    p.send("cli.fine", &json!({"n": 1}), Duration::from_secs(600))
        .await
        .unwrap();
    p.publish("st.fine", &json!({"n": 1})).await.unwrap();
    let mut c = server.connection();
    let _: () = redis::pipe()
        .sadd("delayq:registry:topics", "bad topic")
        .sadd("delayq:registry:topics", "evil\u{1b}[2J")
        .sadd("delayq:registry:streams", "st.string")
        .set("st.string", "not a stream")
        .query(&mut c)
        .unwrap();

    let run = delayq(&url, &["topics"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("cli.fine"), "{}", run.stdout);
    assert!(
        run.stdout.contains("bad topic") && run.stdout.contains("cannot read"),
        "{}",
        run.stdout
    );
    assert_inert("topics", &run.stdout);
    assert!(
        run.stderr.contains("2 topics could not be read"),
        "{}",
        run.stderr
    );
    let topics: Value = delayq(&url, &["--json", "topics"]).json();
    let rows = topics.as_array().unwrap();
    assert_eq!(rows.len(), 3, "{topics}");
    assert!(
        rows.iter()
            .any(|t| t["topic"] == "cli.fine" && t["delayed"] == 1),
        "{topics}"
    );
    assert!(
        rows.iter()
            .any(|t| t["topic"] == "bad topic" && t["error"].is_string()),
        "{topics}"
    );
    for args in [["stats"], ["streams"]] {
        let run = delayq(&url, &args);
        assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains("cannot read"),
            "{args:?}: {}",
            run.stdout
        );
    }
    let streams = delayq(&url, &["streams"]).stdout;
    assert!(
        streams.contains("st.fine") && streams.contains("st.string"),
        "{streams}"
    );

    // The dashboard's overview: 200, with the same error rows.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_delayq"));
    cmd.args(["--redis-url", &url, "dashboard", "--listen", "127.0.0.1:0"])
        .env_remove("DELAYQ_NAMESPACE");
    let board = Service::start(cmd);
    let (code, o) = get_json(&http_agent(), &format!("{}/api/overview", board.url()));
    assert_eq!(code, 200, "{o}");
    let topic = |name: &str| {
        o["topics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["topic"] == name)
            .cloned()
    };
    assert_eq!(topic("cli.fine").unwrap()["delayed"], 1, "{o}");
    assert!(topic("bad topic").unwrap()["error"].is_string(), "{o}");
    let stream = |name: &str| {
        o["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stream"] == name)
            .cloned()
    };
    assert_eq!(stream("st.fine").unwrap()["length"], 1, "{o}");
    assert!(stream("st.string").unwrap()["error"].is_string(), "{o}");
}
