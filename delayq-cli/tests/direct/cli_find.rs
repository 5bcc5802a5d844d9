//! `delayq find TOPIC ID`: where one message is now — delayed (hot, due in `ready`, or in a
//! far bucket), in flight with its claim's deadline and attempt, dead with its reason,
//! finished within a `dedup_for` window, or unknown (exit 1) — with its payload, attempts and
//! last error; a hand-edited envelope shown as unreadable, not a crash; and the same few
//! commands per lookup whether the topic holds ten messages or twenty thousand.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_core::protocol::queue;
use delayq_core::{Priority, SendOptions};
use delayq_dev::{keys, producer, RedisServer};
use serde_json::json;

use crate::common::delayq;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn with_id(id: &str) -> SendOptions {
    SendOptions::new().id(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_tells_where_a_message_is_in_each_state() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    let t = "cli.find";
    let send = |id: &str, delay: Duration, o: SendOptions| {
        let p = p.clone();
        let id = id.to_string();
        async move {
            p.send_with(t, &json!({"order": id}), o.id(&id).delay(delay))
                .await
                .unwrap()
        }
    };
    send("soon", Duration::from_secs(60), SendOptions::new()).await;
    send("far", Duration::from_secs(90 * 86_400), SendOptions::new()).await;
    // Claimed with a 30 s lease: in flight, attempt 1.
    send("running", Duration::ZERO, SendOptions::new()).await;
    let q = queue(&p, t).unwrap();
    let claimed = q
        .claim_due(1, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(claimed[0].id.as_str(), "running");
    // Failed once with max_attempts 1: dead, with its reason and last error.
    send("broken", Duration::ZERO, SendOptions::new().max_attempts(1)).await;
    let c = q
        .claim_due(1, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    q.nack(
        &c[0].id,
        c[0].token(),
        Duration::ZERO,
        "card declined",
        16,
        None,
    )
    .await
    .unwrap();
    // Acked with a dedup window: finished, its id reserved.
    send(
        "done",
        Duration::ZERO,
        SendOptions::new().dedup_for(Duration::from_secs(600)),
    )
    .await;
    let c = q
        .claim_due(1, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    q.ack(&[c[0].receipt()]).await.unwrap();
    // A priority: a claim moves the due messages into `ready` and takes the highest.
    send("plain", Duration::ZERO, SendOptions::new()).await;
    send(
        "urgent",
        Duration::ZERO,
        SendOptions::new().priority(Priority::High),
    )
    .await;
    let c = q
        .claim_due(1, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(c[0].id.as_str(), "urgent");

    let find = |id: &str| {
        let run = delayq(&url, &["--json", "find", t, id]);
        assert_eq!(run.code, 0, "{id}: {} {}", run.stdout, run.stderr);
        run.json()
    };
    let at = now_ms();
    let soon = find("soon");
    assert_eq!(
        (&soon["place"], &soon["attempts"]),
        (&json!("delayed"), &json!(0))
    );
    let due = soon["due_ms"].as_u64().unwrap();
    assert!(due.abs_diff(at + 60_000) < 5_000, "{soon}");
    assert_eq!(soon["payload"], json!({"order": "soon"}));

    let far = find("far");
    assert_eq!(far["place"], "delayed", "{far}");
    let due = far["due_ms"].as_u64().unwrap();
    assert!(due.abs_diff(at + 90 * 86_400_000) < 5_000, "{far}");
    assert_eq!(far["payload"], json!({"order": "far"}));

    let running = find("running");
    assert_eq!(
        (&running["place"], &running["attempts"]),
        (&json!("inflight"), &json!(1))
    );
    let deadline = running["claim_deadline_ms"].as_u64().unwrap();
    assert!(deadline.abs_diff(at + 30_000) < 5_000, "{running}");

    let broken = find("broken");
    assert_eq!(broken["place"], "dead", "{broken}");
    assert_eq!(broken["last_error"], "card declined");
    assert!(!broken["reason"].as_str().unwrap().is_empty(), "{broken}");
    assert!(broken["died_ms"].as_u64().unwrap().abs_diff(at) < 5_000);

    let done = find("done");
    assert_eq!(done["place"], "finished", "{done}");
    assert!(
        done["reserved_until_ms"]
            .as_u64()
            .unwrap()
            .abs_diff(at + 600_000)
            < 5_000
    );

    let plain = find("plain");
    assert_eq!(plain["place"], "delayed", "in ready: {plain}");
    assert!(plain["due_ms"].as_u64().unwrap() <= now_ms(), "{plain}");

    // People read it as fields; an unknown id is exit 1 with what that may mean.
    let run = delayq(&url, &["find", t, "running"]);
    assert!(
        run.stdout.contains("in flight (attempt 1), claim ends in"),
        "{}",
        run.stdout
    );
    let run = delayq(&url, &["find", t, "broken"]);
    assert!(run.stdout.contains("card declined"), "{}", run.stdout);
    let run = delayq(&url, &["find", t, "never-sent"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stderr.contains("never sent, or acknowledged"),
        "{}",
        run.stderr
    );
    let run = delayq(&url, &["--json", "find", t, "never-sent"]);
    assert!(run.json()["error"]
        .as_str()
        .unwrap()
        .contains("not on cli.find"));
    // A typo in the topic is not "unknown message"; a bad id is a usage error.
    let run = delayq(&url, &["find", "cli.fnd", "soon"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("no topic"), "{}", run.stderr);
    let run = delayq(&url, &["find", t, &"x".repeat(10_000)]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edited_envelope_is_shown_as_unreadable() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "cli.find.bad";
    p.send_with(t, &1u8, with_id("edited").delay(Duration::from_secs(60)))
        .await
        .unwrap();
    let k = keys(t);
    let mut c = server.connection();
    let _: () = redis::cmd("HSET")
        .arg(&k.msg)
        .arg("edited")
        .arg("not an envelope")
        .query(&mut c)
        .unwrap();
    let run = delayq(&server.url(), &["--json", "find", t, "edited"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let f = run.json();
    assert_eq!(f["place"], "delayed");
    assert!(f["unreadable"].as_str().unwrap().contains("header"), "{f}");
    assert_eq!(f["payload"], "not an envelope");
    // Its envelope gone: still found where its id is, said to be missing.
    let _: () = redis::cmd("HDEL")
        .arg(&k.msg)
        .arg("edited")
        .query(&mut c)
        .unwrap();
    let f = delayq(&server.url(), &["--json", "find", t, "edited"]).json();
    assert_eq!(f["place"], "delayed");
    assert_eq!(f["unreadable"], "its envelope is missing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_costs_the_same_in_a_topic_of_twenty_thousand() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "cli.find.big";
    let lookup_cost = |id: &str| {
        let before: u64 = server.command_calls().values().sum();
        let run = delayq(&server.url(), &["--json", "find", t, id]);
        let after: u64 = server.command_calls().values().sum();
        (run, after - before)
    };
    p.send_with(
        t,
        &0u32,
        with_id("needle").delay(Duration::from_secs(3_600)),
    )
    .await
    .unwrap();
    let (run, small) = lookup_cost("needle");
    assert_eq!(run.json()["place"], "delayed");
    for chunk in 0..20u64 {
        let batch = (0..1_000u64).map(|i| (i, Duration::from_secs(60 + chunk * 1_000 + i)));
        p.send_batch(t, batch).await.unwrap();
    }
    let (run, big) = lookup_cost("needle");
    assert_eq!(run.json()["place"], "delayed");
    let (_, missing) = lookup_cost("not-there");
    println!("commands per lookup: {small} with 1 message, {big} with 20,001, {missing} for an unknown id");
    assert!(
        big <= small + 2 && missing <= small + 4,
        "{small} {big} {missing}"
    );
    assert!(big < 40, "{big} commands");
}

/// A far record and a due time edited by hand: found where they are, the record shown as
/// unreadable, a time below zero as 0; never an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_edited_far_records_and_scores_are_found() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "cli.find.edited";
    let far = SendOptions::new()
        .id("far-1")
        .delay(Duration::from_secs(90 * 86_400));
    p.send_with(t, &json!({"x": 1}), far).await.unwrap();
    let soon = SendOptions::new().id("neg").delay(Duration::from_secs(60));
    p.send_with(t, &1u8, soon).await.unwrap();
    let k = keys(t);
    let mut c = server.connection();
    let bucket: String = redis::cmd("HGET")
        .arg(&k.far_index)
        .arg("far-1")
        .query(&mut c)
        .unwrap_or_default();
    let bucket = if bucket.is_empty() {
        // Its id told the bucket (no `where` entry): the only one there is.
        let b: Vec<String> = redis::cmd("ZRANGE")
            .arg(&k.far)
            .arg(0)
            .arg(0)
            .query(&mut c)
            .unwrap();
        b[0].clone()
    } else {
        bucket
    };
    let _: () = redis::cmd("HSET")
        .arg(format!("{}:{bucket}", k.far))
        .arg("far-1")
        .arg("not a record")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg(&k.delayed)
        .arg("-5")
        .arg("neg")
        .query(&mut c)
        .unwrap();
    let run = delayq(&server.url(), &["--json", "find", t, "far-1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let f = run.json();
    assert_eq!(f["place"], "delayed", "{f}");
    assert!(f["unreadable"].is_string(), "{f}");
    assert_eq!(f["payload"], "not a record");
    let due = f["due_ms"].as_u64().unwrap();
    assert!(due.abs_diff(now_ms() + 90 * 86_400_000) < 86_400_000, "{f}");
    let run = delayq(&server.url(), &["--json", "find", t, "neg"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["due_ms"], 0);
}
