//! `delayq result TOPIC ID [--wait D]`: a kept value, a dead message's reason, pending, and
//! unknown (exit 1); `--wait` ends by its timeout.

use std::time::{Duration, Instant};

use delayq_core::protocol::queue;
use delayq_core::SendOptions;
use delayq_dev::{producer, RedisServer};
use serde_json::{json, Value};

use crate::common::delayq;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_shows_what_a_handler_returned_or_how_it_ended() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    let t = "cli.result";
    let q = queue(&p, t).unwrap();
    p.send_with(t, &1, SendOptions::new().id("kept"))
        .await
        .unwrap();
    let d = q
        .claim_due(1, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    let acked = q
        .ack_keep(&[(
            d[0].receipt(),
            br#"{"url":"https://cdn.example/1.mp4"}"#.to_vec(),
        )])
        .await
        .unwrap();
    assert_eq!(acked, [true]);
    let run = delayq(&url, &["--json", "result", t, "kept"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(
        v,
        json!({"id": "kept", "outcome": "done", "value": {"url": "https://cdn.example/1.mp4"}})
    );
    let run = delayq(&url, &["result", t, "kept"]);
    assert_eq!(
        run.stdout.trim(),
        r#"kept: done {"url":"https://cdn.example/1.mp4"}"#
    );

    p.send_with(
        t,
        &2,
        SendOptions::new()
            .id("later")
            .delay(Duration::from_secs(600)),
    )
    .await
    .unwrap();
    let run = delayq(&url, &["result", t, "later"]);
    assert_eq!((run.code, run.stdout.trim()), (0, "later: pending"));
    let started = Instant::now();
    let run = delayq(&url, &["--json", "result", t, "later", "--wait", "300ms"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(r#""outcome":"pending""#),
        "{}",
        run.stdout
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    let run = delayq(&url, &["result", t, "never"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stderr.contains("nothing is known of never"),
        "{}",
        run.stderr
    );
    let run = delayq(&url, &["result", "no.such.topic", "x"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("no topic"), "{}", run.stderr);
}
