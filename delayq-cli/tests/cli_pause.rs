//! `delayq pause TOPIC` and `delayq resume TOPIC`: the state a producer and every runtime see,
//! an unknown topic refused, and what each says when nothing changes.

use std::time::Duration;

use delayq_dev::{producer, RedisServer};

mod common;
use common::delayq;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_pauses_and_resumes_a_topic() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    p.send("cli.pause", &1u8, Duration::from_secs(60))
        .await
        .unwrap();

    let run = delayq(&url, &["--json", "pause", "cli.pause"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["outcome"], "paused");
    assert!(p.is_paused("cli.pause").await.unwrap());
    let run = delayq(&url, &["--json", "stats", "cli.pause"]);
    assert_eq!(run.json()[0]["paused"], true, "{}", run.stdout);
    let run = delayq(&url, &["stats", "cli.pause"]);
    assert!(run.stdout.contains("cli.pause (paused)"), "{}", run.stdout);
    let run = delayq(&url, &["pause", "cli.pause"]);
    assert_eq!(
        (run.code, run.stdout.trim()),
        (0, "cli.pause: already paused")
    );

    let run = delayq(&url, &["resume", "cli.pause"]);
    assert_eq!(
        (run.code, run.stdout.trim()),
        (0, "cli.pause: resumed"),
        "{}",
        run.stderr
    );
    assert!(!p.is_paused("cli.pause").await.unwrap());
    let run = delayq(&url, &["--json", "stats", "cli.pause"]);
    assert_eq!(run.json()[0]["paused"], false, "{}", run.stdout);
    let run = delayq(&url, &["--json", "resume", "cli.pause"]);
    assert_eq!(run.json()["outcome"], "not_paused");

    let run = delayq(&url, &["pause", "cli.typo"]);
    assert_eq!(run.code, 1, "an unknown topic is refused: {}", run.stdout);
    assert!(!p.is_paused("cli.typo").await.unwrap());
}
