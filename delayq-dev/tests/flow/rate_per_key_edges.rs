// Review of rate_per_key (0f4f927), each failing on that commit: a quiet key's state goes
// after its window even when nothing more comes due; a held-back high message keeps its
// priority; a key's held-back messages whose starts passed during a pause in claims do not
// all start at once.
// API.md, "Flow control": `rate_per_key`: the same [as `rate`: ... A message held back is not
// claimed, uses no attempt, and runs as soon as the limit allows] per `SendOptions::key(k)`;
// a limited key never delays other keys' due messages; a quiet key costs no memory after its
// window. And for priorities: "among due messages higher priority is claimed first".
// The claims are driven directly (TopicQueue::claim_due, as a boss would), so the tests count
// work and read scores instead of timing handlers.

use std::time::Duration;

use delayq_core::protocol::{Flow, TopicKeys};
use delayq_core::{MessageId, Priority, SendOptions};

use delayq_dev::{producer, sleep_ms, RedisServer};
use delayq_runtime::__private::Rate;
use delayq_runtime::delay_listener;

fn per_key(rate: Option<&str>) -> Flow {
    Flow {
        rate_per_key: rate.map(|r| Rate::parse(r).unwrap()),
        ..Flow::default()
    }
}

fn zcard(server: &RedisServer, key: &str) -> u64 {
    redis::cmd("ZCARD")
        .arg(key)
        .query(&mut server.connection())
        .unwrap()
}

async fn send_key(p: &delayq_core::Producer, t: &str, tag: &str, key: &str) -> MessageId {
    p.send_with(t, &tag.to_string(), SendOptions::new().key(key))
        .await
        .unwrap()
        .id()
        .clone()
}

// --- 1. A quiet key's state is never removed once nothing is due -------------------------

#[delay_listener(topic = "review.key.quiet", rate_per_key = "5/s")]
async fn quiet_handler(_tag: String) {}

/// 50 keys, one message each, all handled by a real runtime; then the topic is quiet. The
/// keys' windows (200 ms at 5/s) pass, yet `keyrate` keeps every key: claim_due.lua prunes
/// only inside pick_per_key, which returns before the prune when no message is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_keys_hold_no_state_after_their_window() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "review.key.quiet";
    let keys = TopicKeys::new("delayq", t).unwrap();
    let rt = crate::runtime(&server, t).await;
    for k in 0..50 {
        send_key(&p, t, &format!("m{k}"), &format!("customer-{k}")).await;
    }
    delayq_dev::drained(&p, t, Duration::from_secs(10)).await;
    // Far past every key's window (200 ms), and a few idle boss rounds.
    sleep_ms(3_000).await;
    let held = zcard(&server, &keys.keyrate);
    rt.shutdown().await.unwrap();
    assert_eq!(
        held, 0,
        "{held} quiet keys still held in {} 3 s after their 200 ms window",
        keys.keyrate
    );
}

// --- A held-back high message keeps its priority ---------------------------------------

/// A topic with priorities and rate_per_key 1/s. Two high messages of key k: one runs, the
/// other is held back (moved from `ready` back to `delayed`; the move to `ready` had removed
/// its entry in the priority index, and the park does not restore it). When it comes due with
/// normal messages of other keys that are due too, it should be claimed first; it is read
/// back as Normal and ordered by its due time, after them.
#[tokio::test]
async fn a_held_back_high_message_keeps_its_priority() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "review.key.prio";
    for tag in ["h1", "h2"] {
        p.send_with(
            t,
            &tag.to_string(),
            SendOptions::new().key("k").priority(Priority::High),
        )
        .await
        .unwrap();
    }
    let q = delayq_core::protocol::queue(&p, t)
        .unwrap()
        .with_flow(per_key(Some("1/s")));
    let first = q.claim_due(10, Duration::from_secs(30)).await.unwrap();
    assert_eq!(first.claimed.len(), 1, "h1 runs, h2 waits a second");
    sleep_ms(300).await;
    // Normal messages of other keys, due now, not claimed yet (the consumer is busy).
    for n in 0..3 {
        send_key(&p, t, &format!("normal-{n}"), &format!("other-{n}")).await;
    }
    sleep_ms(1_000).await; // h2's start has come
    let b = q.claim_due(1, Duration::from_secs(30)).await.unwrap();
    let got: Vec<String> = b
        .claimed
        .iter()
        .map(|d| serde_json::from_slice::<String>(&d.envelope.payload).unwrap())
        .collect();
    assert_eq!(
        got,
        ["h2"],
        "a high message due with normal ones was not claimed first"
    );
}

// --- 5. Held-back messages whose starts passed while nothing claimed start all at once -----

/// 10/s per key (burst 1): 30 messages of one key, one claimed, 29 given starts 100 ms apart.
/// Then nothing claims for 1.5 s (every runtime restarting, or the topic paused, or its
/// slots busy). The next claim takes every held-back message whose start has passed (they
/// are "claimed without asking the limit again"): 15 handler starts for the key at one
/// instant, where 10/s with burst 1 allows one (the topic's `rate` would allow its burst).
#[tokio::test]
async fn held_back_messages_do_not_start_at_once_after_a_pause_in_claims() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "review.key.burst";
    for n in 0..30 {
        send_key(&p, t, &format!("m{n}"), "hot").await;
    }
    let q = delayq_core::protocol::queue(&p, t)
        .unwrap()
        .with_flow(per_key(Some("10/s")));
    let first = q.claim_due(64, Duration::from_secs(30)).await.unwrap();
    assert_eq!(first.claimed.len(), 1);
    p.pause(t).await.unwrap();
    sleep_ms(1_500).await;
    p.resume(t).await.unwrap();
    let b = q.claim_due(64, Duration::from_secs(30)).await.unwrap();
    assert!(
        b.claimed.len() <= 2,
        "key 'hot' at 10/s (burst 1): {} handler starts in one claim after a 1.5 s pause",
        b.claimed.len()
    );
}

