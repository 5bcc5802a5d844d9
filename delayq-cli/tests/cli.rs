//! The `delayq` binary as an operator runs it: a process against a test-kit Redis, every
//! command as a table and as `--json`, and the exit codes of bad input.

use std::time::Duration;

use delayq_dev::{producer, wait_until, RedisServer};
use delayq_runtime::{delay_listener, MessageId, RoomConfig, Runtime, SendOptions, WaitingRoom};
use serde_json::Value;

mod common;
use common::{delayq, table_row, Run};

/// Fails every time, so its messages die after their one attempt.
#[delay_listener(topic = "cli.poison", max_attempts = 1)]
async fn always_fails(_msg: Value) -> Result<(), String> {
    Err("boom: card declined".into())
}

/// Runs and expects exit code `code`.
fn expect(url: &str, args: &[&str], code: i32) -> Run {
    let run = delayq(url, args);
    assert_eq!(
        run.code, code,
        "delayq {args:?}\nstdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_shows_and_changes_topics() {
    let server = RedisServer::start();
    let url = server.url();
    let url = url.as_str();

    // Nothing yet: empty tables, empty JSON lists.
    let run = expect(url, &["topics"], 0);
    assert!(run.stdout.contains("TOPIC"), "{}", run.stdout);
    assert_eq!(
        expect(url, &["--json", "topics"], 0).json(),
        serde_json::json!([])
    );

    // send: created, duplicate, replaced.
    let sent = expect(
        url,
        &[
            "--json",
            "send",
            "cli.orders",
            r#"{"order_id":7}"#,
            "--delay",
            "30s",
        ],
        0,
    )
    .json();
    assert_eq!(sent["outcome"], "created");
    let first_id = sent["id"].as_str().unwrap().to_string();
    let args = [
        "send",
        "cli.orders",
        r#"{"order_id":8}"#,
        "--delay",
        "10m",
        "--id",
        "o-8",
    ];
    let run = expect(url, &args, 0);
    assert_eq!(run.stdout.trim(), "o-8: created on cli.orders");
    assert_eq!(
        expect(url, &[&["--json"][..], &args].concat(), 0).json()["outcome"],
        "duplicate"
    );
    let replaced = [&args[..], &["--replace"]].concat();
    assert_eq!(
        expect(url, &[&["--json"][..], &replaced].concat(), 0).json()["outcome"],
        "replaced"
    );

    // topics and stats.
    let run = expect(url, &["topics"], 0);
    assert_eq!(
        table_row(&run.stdout, "cli.orders"),
        ["cli.orders", "2", "0", "0"]
    );
    let topics = expect(url, &["--json", "topics"], 0).json();
    assert_eq!(
        topics,
        serde_json::json!([{"topic": "cli.orders", "delayed": 2, "inflight": 0, "dead": 0}])
    );
    let run = expect(url, &["stats", "cli.orders"], 0);
    let row = table_row(&run.stdout, "cli.orders");
    assert_eq!(&row[1..4], ["2", "0", "0"]);
    assert_eq!(row[4], "in", "next due is relative: {row:?}");
    let stats = expect(url, &["--json", "stats"], 0).json();
    let s = &stats[0];
    assert_eq!(
        (
            s["delayed"].as_u64(),
            s["inflight"].as_u64(),
            s["dead"].as_u64()
        ),
        (Some(2), Some(0), Some(0))
    );
    let due_in = s["next_due_ms"].as_u64().unwrap() - s["read_at_ms"].as_u64().unwrap();
    assert!((28_000..=30_000).contains(&due_in), "{s}");
    assert!(s["oldest_claim_deadline_ms"].is_null());

    // peek: earliest first, payloads kept as JSON.
    let peek = expect(url, &["--json", "peek", "cli.orders"], 0).json();
    assert_eq!(peek[0]["id"], first_id.as_str());
    assert_eq!(peek[0]["payload"], serde_json::json!({"order_id": 7}));
    assert_eq!(peek[1]["id"], "o-8");
    assert_eq!(peek.as_array().unwrap().len(), 2);
    let run = expect(url, &["peek", "cli.orders", "--limit", "1"], 0);
    assert!(
        run.stdout.contains(&first_id) && !run.stdout.contains("o-8"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains(r#"{"order_id":7}"#), "{}", run.stdout);

    // cancel: removed (0), then not found (1).
    let run = expect(url, &["cancel", "cli.orders", "o-8"], 0);
    assert_eq!(run.stdout.trim(), "o-8: removed");
    let run = expect(url, &["--json", "cancel", "cli.orders", "o-8"], 1);
    let error = run.json()["error"].as_str().unwrap().to_string();
    assert!(
        error.contains("not pending") && error.contains("not_found"),
        "{error}"
    );
    assert!(run.stderr.contains("not pending"), "{}", run.stderr);
    assert_eq!(
        producer(&server)
            .await
            .counts("cli.orders")
            .await
            .unwrap()
            .delayed,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_lists_shows_replays_and_purges_dead_letters() {
    let server = RedisServer::start();
    let url = server.url();
    let url = url.as_str();
    let p = producer(&server).await;
    let runtime = Runtime::builder()
        .redis_url(server.url())
        .topics(["cli.poison"])
        .spawn()
        .await
        .unwrap();
    for i in 0..3 {
        let options = SendOptions::new().id(format!("bad-{i}"));
        p.send_with("cli.poison", &serde_json::json!({"n": i}), options)
            .await
            .unwrap();
    }
    wait_until(Duration::from_secs(20), "three dead letters", || {
        expect(url, &["--json", "stats", "cli.poison"], 0).json()[0]["dead"] == 3
    })
    .await;
    runtime.shutdown().await.unwrap();

    // stats counts the deaths of the last minute.
    let stats = expect(url, &["--json", "stats", "cli.poison"], 0).json();
    assert_eq!(stats[0]["last_minute"]["dead"], 3, "{stats}");
    let run = expect(url, &["stats"], 0);
    let row = table_row(&run.stdout, "cli.poison");
    // ... DEAD/MIN, TIMED OUT/MIN
    assert_eq!(row[row.len() - 2..], ["3", "0"]);

    // list and show.
    let list = expect(url, &["--json", "dead", "list", "cli.poison"], 0).json();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(
        list[0]["reason"].as_str().unwrap().contains("max_attempts"),
        "{list}"
    );
    assert_eq!(list[0]["last_error"], "boom: card declined");
    let run = expect(url, &["dead", "list", "cli.poison"], 0);
    assert!(
        run.stdout.contains("bad-0") && run.stdout.contains("REASON"),
        "{}",
        run.stdout
    );
    let shown = expect(url, &["--json", "dead", "show", "cli.poison", "bad-1"], 0).json();
    assert_eq!(shown["payload"], serde_json::json!({"n": 1}));
    assert_eq!(shown["attempts"], 1);
    let run = expect(url, &["dead", "show", "cli.poison", "bad-1"], 0);
    assert!(
        run.stdout.contains("boom: card declined") && run.stdout.contains(r#"{"n":1}"#),
        "{}",
        run.stdout
    );
    expect(url, &["dead", "show", "cli.poison", "nope"], 1);

    // replay one: back to delayed, due now.
    let run = expect(url, &["--json", "dead", "replay", "cli.poison", "bad-1"], 0);
    assert_eq!(run.json()["replayed"], 1);
    let counts = p.counts("cli.poison").await.unwrap();
    assert_eq!((counts.delayed, counts.dead), (1, 2));
    expect(url, &["dead", "replay", "cli.poison", "bad-1"], 1);

    // purge one, then replay --all, then purge --all.
    let run = expect(url, &["dead", "purge", "cli.poison", "bad-0"], 0);
    assert_eq!(run.stdout.trim(), "purged 1 on cli.poison");
    assert_eq!(p.counts("cli.poison").await.unwrap().dead, 1);
    let run = expect(url, &["--json", "dead", "replay", "cli.poison", "--all"], 0);
    assert_eq!(run.json()["replayed"], 1);
    let counts = p.counts("cli.poison").await.unwrap();
    assert_eq!((counts.delayed, counts.dead), (2, 0));
    // Nothing is dead now: purge --all purges none.
    assert_eq!(
        expect(url, &["--json", "dead", "purge", "cli.poison", "--all"], 0).json()["purged"],
        0
    );
    // Neither an id nor --all is a usage error.
    expect(url, &["dead", "replay", "cli.poison"], 2);
    expect(url, &["dead", "purge", "cli.poison", "bad-2", "--all"], 2);
    let id = MessageId::new("bad-2").unwrap();
    assert!(!p.purge_dead_letter("cli.poison", &id).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_lists_streams_and_rooms() {
    let server = RedisServer::start();
    let url = server.url();
    let url = url.as_str();
    let p = producer(&server).await;
    for i in 0..5 {
        p.publish("cli.events", &serde_json::json!({"i": i}))
            .await
            .unwrap();
    }
    let mut conn = server.connection();
    let _: () = redis::cmd("XGROUP")
        .arg(&["CREATE", "cli.events", "billing", "0"][..])
        .query(&mut conn)
        .unwrap();
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(
            &[
                "GROUP",
                "billing",
                "c1",
                "COUNT",
                "2",
                "STREAMS",
                "cli.events",
                ">",
            ][..],
        )
        .query(&mut conn)
        .unwrap();
    let streams = expect(url, &["--json", "streams"], 0).json();
    assert_eq!(streams[0]["stream"], "cli.events");
    assert_eq!(streams[0]["length"], 5);
    assert_eq!(streams[0]["dead"], 0);
    let g = &streams[0]["groups"][0];
    assert_eq!(
        (
            g["group"].as_str(),
            g["consumers"].as_u64(),
            g["pending"].as_u64(),
            g["lag"].as_u64()
        ),
        (Some("billing"), Some(1), Some(2), Some(3))
    );
    let run = expect(url, &["streams"], 0);
    assert_eq!(
        table_row(&run.stdout, "cli.events"),
        ["cli.events", "5", "0", "billing", "1", "2", "3"]
    );

    let room = WaitingRoom::new(&p, "cli.sale", RoomConfig::fixed(2, 1_000)).unwrap();
    for _ in 0..3 {
        room.enter().await.unwrap();
    }
    room.admit().await.unwrap();
    assert_eq!(
        expect(url, &["--json", "rooms"], 0).json(),
        serde_json::json!([{"room": "cli.sale", "waiting": 1, "active": 2}])
    );
    let run = expect(url, &["rooms"], 0);
    assert_eq!(table_row(&run.stdout, "cli.sale"), ["cli.sale", "1", "2"]);
}

#[test]
fn cli_exit_codes_for_bad_input() {
    let server = RedisServer::start();
    let url = server.url();
    let url = url.as_str();
    expect(url, &["send", "cli.x", "{}"], 0);

    // Unknown topic: an error (1) that names what is known.
    for args in [
        &["stats", "cli.y"][..],
        &["peek", "cli.y"],
        &["cancel", "cli.y", "a"],
        &["dead", "list", "cli.y"],
    ] {
        let run = expect(url, args, 1);
        assert!(
            run.stderr.contains("no topic \"cli.y\"") && run.stderr.contains("cli.x"),
            "{}",
            run.stderr
        );
    }
    let run = expect(url, &["--json", "stats", "cli.y"], 1);
    assert!(run.json()["error"].as_str().unwrap().contains("no topic"));

    // Bad JSON, bad duration, bad names, missing arguments: usage (2).
    let run = expect(url, &["send", "cli.x", "{oops"], 2);
    assert!(run.stderr.contains("not JSON"), "{}", run.stderr);
    let run = expect(url, &["send", "cli.x", "{}", "--delay", "5"], 2);
    assert!(run.stderr.contains("--delay"), "{}", run.stderr);
    expect(url, &["send", "cli.x", "{}", "--delay", "soon"], 2);
    let run = expect(url, &["send", "bad topic", "{}"], 2);
    assert!(run.stderr.contains("invalid topic"), "{}", run.stderr);
    expect(url, &["send", "cli.x", "{}", "--max-attempts", "0"], 2);
    expect(url, &["send", "cli.x", "{}", "--replace"], 2);
    expect(url, &["peek"], 2);
    expect(url, &["frobnicate"], 2);
    expect(url, &["--namespace", "no spaces", "topics"], 2);
    // Nothing was written by the refused sends.
    let topics = expect(url, &["--json", "topics"], 0).json();
    assert_eq!(
        topics,
        serde_json::json!([{"topic": "cli.x", "delayed": 1, "inflight": 0, "dead": 0}])
    );

    // A namespace of another layout is refused, and looking at a new one does not mark it.
    let _: () = redis::cmd("SET")
        .arg("future:layout")
        .arg("99")
        .query(&mut server.connection())
        .unwrap();
    let run = expect(url, &["--namespace", "future", "topics"], 1);
    assert!(run.stderr.contains("layout 99"), "{}", run.stderr);
    expect(url, &["--namespace", "fresh", "topics"], 0);
    let fresh: Option<String> = redis::cmd("GET")
        .arg("fresh:layout")
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(fresh, None);

    // Redis down: an error (1) that says where it looked.
    let port = server.port();
    drop(server);
    let down = format!("redis://127.0.0.1:{port}");
    let run = expect(&down, &["topics"], 1);
    assert!(run.stderr.contains("cannot connect"), "{}", run.stderr);
    expect(&down, &["--json", "send", "cli.x", "{}"], 1);

    // --help on every command, exit 0.
    for cmd in [
        &[][..],
        &["topics"],
        &["stats"],
        &["peek"],
        &["send"],
        &["cancel"],
        &["dead"],
        &["dead", "list"],
        &["dead", "show"],
        &["dead", "replay"],
        &["dead", "purge"],
        &["streams"],
        &["rooms"],
        &["dashboard"],
    ] {
        let run = expect(&down, &[cmd, &["--help"]].concat(), 0);
        assert!(
            run.stdout.contains("Usage: delayq"),
            "{cmd:?}: {}",
            run.stdout
        );
    }
}

/// Runs `delayq ARGS…` with only the given delayq variables (and `DELAYQ_CONFIG`).
fn delayq_env(vars: &[(&str, &str)], args: &[&str]) -> Run {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_delayq"));
    cmd.args(args)
        .env_remove("DELAYQ_REDIS_URL")
        .env_remove("DELAYQ_NAMESPACE")
        .env_remove("DELAYQ_CONFIG");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run delayq");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The CLI finds Redis and the namespace where the runtime does: flag > variable >
/// `delayq.toml` > default, and `topics` says which namespace and from where.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reads_redis_and_the_namespace_from_the_runtimes_file() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await.with_namespace("shop").unwrap();
    p.send("cli.shop", &1, Duration::from_secs(60))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("delayq.toml");
    std::fs::write(
        &file,
        format!("redis_url = \"{url}\"\nnamespace = \"shop\"\n"),
    )
    .unwrap();
    let config = file.to_str().unwrap();

    let run = delayq_env(&[("DELAYQ_CONFIG", config)], &["topics"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(&format!("namespace shop ({config}:2)")),
        "{}",
        run.stdout
    );
    assert_eq!(
        table_row(&run.stdout, "cli.shop"),
        ["cli.shop", "1", "0", "0"]
    );
    let json = delayq_env(&[("DELAYQ_CONFIG", config)], &["--json", "topics"]).json();
    assert_eq!(json[0]["topic"], "cli.shop");

    // The variable outranks the file, the flag the variable.
    let run = delayq_env(
        &[("DELAYQ_CONFIG", config), ("DELAYQ_NAMESPACE", "other")],
        &["topics"],
    );
    assert!(
        run.stdout
            .contains("namespace other (env DELAYQ_NAMESPACE)"),
        "{}",
        run.stdout
    );
    let run = delayq_env(
        &[("DELAYQ_CONFIG", config), ("DELAYQ_NAMESPACE", "other")],
        &["--namespace", "third", "topics"],
    );
    assert!(
        run.stdout.contains("namespace third (--namespace)"),
        "{}",
        run.stdout
    );
    // A file the runtime would refuse is refused here too, naming the problem.
    std::fs::write(&file, "namespase = \"shop\"\n").unwrap();
    let run = delayq_env(&[("DELAYQ_CONFIG", config)], &["topics"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("did you mean \"namespace\""),
        "{}",
        run.stderr
    );
}
