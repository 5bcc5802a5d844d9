//! `delayq flows` and `delayq flow show|retry|cancel ID`: a flow's steps as a tree with their
//! states, cancelling and retrying it, and clear errors for a bad or unknown id.

use std::time::Duration;

use delayq_core::{Flow, OnFailure};
use delayq_dev::{producer, RedisServer};
use serde_json::Value;

use crate::common::delayq;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_are_listed_shown_as_a_tree_cancelled_and_retried() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    let flow = Flow::new()
        .step("fetch", "cli.fetch", &1)
        .delay(Duration::from_secs(3600))
        .step("thumb", "cli.thumb", &2)
        .delay(Duration::from_secs(3600))
        .step("publish", "cli.publish", &3)
        .after(["fetch", "thumb"])
        .if_failed("thumb", OnFailure::Ignore);
    let id = p.start_flow(flow).await.unwrap();
    let run = delayq(&url, &["flow", "show", id.as_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = run.stdout;
    assert!(text.starts_with(&format!("flow {id} running")), "{text}");
    assert!(text.contains("  fetch [cli.fetch] sent run 0"), "{text}");
    assert!(
        text.contains("    publish [cli.publish] waiting run 0, also after thumb (ignore failure)"),
        "{text}"
    );
    let run = delayq(&url, &["--json", "flows"]);
    let v: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(v[0]["id"], id.as_str());
    assert_eq!(v[0]["state"], "running");
    let run = delayq(&url, &["flows", "--state", "failed"]);
    assert_eq!(run.stdout.trim(), "no flows");

    let run = delayq(&url, &["flow", "cancel", id.as_str()]);
    assert_eq!(
        (run.code, run.stdout.trim()),
        (0, format!("{id}: cancelled").as_str())
    );
    assert_eq!(p.counts("cli.fetch").await.unwrap().delayed, 0);
    let run = delayq(&url, &["flow", "cancel", id.as_str()]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("is not running"), "{}", run.stderr);
    let run = delayq(&url, &["--json", "flow", "show", id.as_str()]);
    let v: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(v["state"], "cancelled");
    assert!(v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["state"] == "cancelled"));

    let run = delayq(&url, &["flow", "retry", id.as_str()]);
    assert_eq!(
        (run.code, run.stdout.trim()),
        (0, format!("{id}: 3 steps run again").as_str())
    );
    assert_eq!(p.counts("cli.fetch").await.unwrap().delayed, 1);

    let run = delayq(&url, &["flow", "show", "NOSUCHFLOW"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("no flow NOSUCHFLOW"), "{}", run.stderr);
    let run = delayq(&url, &["flow", "show", "bad id!"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("flow id"), "{}", run.stderr);
    let run = delayq(&url, &["flows", "--state", "sideways"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}
