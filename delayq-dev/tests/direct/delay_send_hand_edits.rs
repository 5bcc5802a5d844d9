//! Sends against messages in every state, and against records edited by hand or written by
//! another program: what each send answers, and what is then delivered (an adversarial
//! review's tests; the last four failed before send.lua looked up everything before its first
//! write and believed a `where` entry only when its bucket holds the id).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, SystemTime};

use delayq_core::protocol::{queue, time_to_ms, travel, NackOutcome};
use delayq_core::{Error, MessageId, SendOptions, SendOutcome};
use delayq_dev::{keys, producer, state, RedisServer};
use redis::Commands;

const LEASE: Duration = Duration::from_secs(30);

fn id(s: &str) -> MessageId {
    MessageId::new(s.to_string()).unwrap()
}

fn opts(s: &str) -> SendOptions {
    SendOptions::new().id(s)
}

/// Replace (and debounce) a message with a user id while it is hot with a priority, due in
/// `ready`, far, dead, or in flight: what each send says, and what is then delivered.
#[tokio::test]
async fn replace_and_debounce_in_every_state() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = queue(&p, "t").unwrap();

    // In flight: claimed first, while it is the only due message.
    p.send_with("t", &"f0", opts("inflight")).await.unwrap();
    let c = q.claim_due(10, LEASE).await.unwrap().claimed;
    assert_eq!(c.len(), 1);
    let inflight_token = c[0].token();

    // Dead: max_attempts 1, claimed, nacked.
    p.send_with("t", &"d0", opts("dead").max_attempts(1))
        .await
        .unwrap();
    let c = q.claim_due(10, LEASE).await.unwrap().claimed;
    assert_eq!(c.len(), 1);
    let out = q
        .nack(&c[0].id, c[0].token(), Duration::ZERO, "boom", 5, None)
        .await
        .unwrap();
    assert!(matches!(out, NackOutcome::Dead), "{out:?}");
    assert_eq!(state(&server, "t", &id("dead")), "dead");

    // Ready: two due messages with a priority, one claimed; the other waits in `ready`.
    p.send_with("t", &"r0", opts("ready").priority(200u8))
        .await
        .unwrap();
    p.send_with("t", &"x0", opts("other").priority(250u8))
        .await
        .unwrap();
    let c = q.claim_due(1, LEASE).await.unwrap().claimed;
    assert_eq!(c[0].id.as_str(), "other");
    let mut conn = server.connection();
    let in_ready: Option<f64> = conn.zscore(keys("t").ready, "ready").unwrap();
    assert!(in_ready.is_some(), "`ready` holds it");

    // Hot with a priority, and far with a priority and a key.
    p.send_with(
        "t",
        &"h0",
        opts("hot").priority(3u8).delay(Duration::from_secs(20)),
    )
    .await
    .unwrap();
    p.send_with(
        "t",
        &"far0",
        opts("far")
            .priority(9u8)
            .key("kk")
            .delay(Duration::from_secs(3 * 3600)),
    )
    .await
    .unwrap();
    // A generated-id far message, replaced by its own id.
    let gen = p
        .send("t", &"g0", Duration::from_secs(5 * 3600))
        .await
        .unwrap();

    let replace = |s: &str| opts(s).replace(true).priority(60u8).key("new-key");
    let mut outcomes = HashMap::new();
    for name in ["inflight", "dead", "ready", "hot", "far"] {
        let o = p
            .send_with("t", &format!("{name}-new"), replace(name))
            .await
            .unwrap();
        outcomes.insert(name, o);
    }
    let g = p
        .send_with(
            "t",
            &"g-new",
            SendOptions::new().id(gen.as_str()).debounce(Duration::ZERO),
        )
        .await
        .unwrap();
    assert!(matches!(g, SendOutcome::Replaced(_)), "{g:?}");
    assert!(matches!(outcomes["inflight"], SendOutcome::Duplicate(_)));
    assert!(matches!(outcomes["dead"], SendOutcome::Created(_)));
    assert!(matches!(outcomes["ready"], SendOutcome::Replaced(_)));
    assert!(matches!(outcomes["hot"], SendOutcome::Replaced(_)));
    assert!(matches!(outcomes["far"], SendOutcome::Replaced(_)));

    // Nothing far is left; the index holds the new priorities only.
    let far_count: Option<i64> = conn.hget(keys("t").farinfo, "count").unwrap();
    assert_eq!(far_count.unwrap_or(0), 0, "far count");
    let buckets: Vec<String> = conn.keys("delayq:{t}:far:*").unwrap();
    assert!(buckets.is_empty(), "{buckets:?}");
    let wh: HashMap<String, String> = conn.hgetall(keys("t").far_index).unwrap();
    assert!(wh.is_empty(), "{wh:?}");

    // Everything due now: claimed once each, new payloads, priority 60 before the default.
    let c = q.claim_due(100, LEASE).await.unwrap().claimed;
    let got: Vec<(String, String, u8, String)> = c
        .iter()
        .map(|d| {
            (
                d.id.as_str().to_string(),
                String::from_utf8(d.envelope.payload.clone()).unwrap(),
                d.envelope.priority,
                d.envelope.key.clone(),
            )
        })
        .collect();
    let names: HashSet<&str> = got.iter().map(|g| g.0.as_str()).collect();
    assert_eq!(names.len(), got.len(), "claimed once each: {got:?}");
    for name in ["dead", "ready", "hot", "far"] {
        let g = got
            .iter()
            .find(|g| g.0 == name)
            .unwrap_or_else(|| panic!("{name}: {got:?}"));
        assert_eq!(
            (g.1.as_str(), g.2, g.3.as_str()),
            (format!("\"{name}-new\"").as_str(), 60, "new-key"),
            "{name}"
        );
    }
    let g = got
        .iter()
        .find(|g| g.0 == gen.as_str())
        .expect("generated id");
    assert_eq!((g.1.as_str(), g.2), ("\"g-new\"", 128));
    assert_eq!(got.len(), 5, "{got:?}");
    // The one in flight kept its payload and token.
    let e = delayq_dev::envelope(&server, "t", &id("inflight")).unwrap();
    assert_eq!(
        (e.payload.as_slice(), e.token),
        (&b"\"f0\""[..], inflight_token)
    );
    let pr: HashMap<String, String> = conn.hgetall(keys("t").priority).unwrap();
    assert!(pr.is_empty(), "index after the claims: {pr:?}");
}

/// A `where` entry (edited by hand, or left over) pointing at a bucket that does not hold the
/// id: a send with that id must not be answered Duplicate of nothing.
#[tokio::test]
async fn a_dangling_where_entry_does_not_swallow_a_send() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    // A far message, so that `far` exists.
    p.send("t", &"other", Duration::from_secs(3600))
        .await
        .unwrap();
    let mut conn = server.connection();
    let b: i64 = conn.zrange::<_, Vec<i64>>(keys("t").far, 0, 0).unwrap()[0];
    let _: () = conn.hset(keys("t").far_index, "ghost", b).unwrap();
    let o = p.send_with("t", &"ghost", opts("ghost")).await.unwrap();
    let there = p.find("t", &id("ghost")).await.unwrap();
    assert!(
        matches!(o, SendOutcome::Created(_)),
        "send said {o:?}; find says {:?}",
        there.place
    );
}

/// A `priority` index entry left for an id not in `delayed` (edited by hand): a new send of
/// that id with the default priority must be claimed at the default priority.
#[tokio::test]
async fn a_stale_priority_index_entry_does_not_lift_a_new_send() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = queue(&p, "t").unwrap();
    let mut conn = server.connection();
    let _: () = conn.hset(keys("t").priority, "plain", 250).unwrap();
    p.send_with("t", &"high", opts("high").priority(200u8))
        .await
        .unwrap();
    p.send_with("t", &"plain", opts("plain")).await.unwrap();
    let c = q.claim_due(1, LEASE).await.unwrap().claimed;
    assert_eq!(
        (c[0].id.as_str(), c[0].envelope.priority),
        ("high", 200),
        "claimed first: {} (priority {} in its envelope)",
        c[0].id,
        c[0].envelope.priority
    );
}

/// A far message whose id also has a stray envelope in `msg` (no state): a send of that id
/// must not leave two messages with the id (the far one comes back after the new one ran).
#[tokio::test]
async fn a_stray_envelope_beside_a_far_message_is_not_a_second_message() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = queue(&p, "t").unwrap();
    p.send_with("t", &"far", opts("x").delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let mut conn = server.connection();
    let _: () = conn
        .hset(keys("t").msg, "x", "1 0 0 0 1 1 0 0\nstray")
        .unwrap();
    let o = p.send_with("t", &"new", opts("x")).await.unwrap();
    let mut delivered = Vec::new();
    for _ in 0..3 {
        let c = q.claim_due(10, LEASE).await.unwrap().claimed;
        for d in &c {
            delivered.push(String::from_utf8(d.envelope.payload.clone()).unwrap());
        }
        let receipts: Vec<_> = c.iter().map(|d| d.receipt()).collect();
        if !receipts.is_empty() {
            q.ack(&receipts).await.unwrap();
        }
        travel(&p, "t", 3_700_000, &[], 0, false).await.unwrap();
    }
    assert_eq!(
        delivered.len(),
        1,
        "send said {o:?}; delivered {delivered:?}"
    );
}

/// Every key of the test's server and its value, as DUMP gives it.
fn snapshot(conn: &mut redis::Connection) -> BTreeMap<String, Vec<u8>> {
    let names: Vec<String> = conn.keys("*").unwrap();
    names
        .into_iter()
        .map(|k| {
            let v: Vec<u8> = redis::cmd("DUMP").arg(&k).query(conn).unwrap();
            (k, v)
        })
        .collect()
}

/// Far bucket keys of the wrong type (a foreign or hand-edited key) where a batch would write
/// (its far message's bucket) or look (its ids' buckets, once `far` exists): the batch fails
/// with an error that names the key, and writes nothing, its hot message neither (a batch
/// writes whole or not at all). Before, the batch wrote the far record it placed before the
/// failing look-up, uncounted and never promoted, and the error was Redis' own.
#[tokio::test]
async fn a_batch_failing_on_a_wrong_type_bucket_writes_nothing() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let mut conn = server.connection();
    let now = time_to_ms(SystemTime::now());
    let minute = |ms: u64| ms / 60_000;
    // The producer's first send registers the topic (and the layout): done before the count.
    p.send("t", &"first", Duration::ZERO).await.unwrap();
    // Where the batch's far message goes (due in 3 h), and where its ids may be looked up
    // (their ULID time, now) once a far message exists.
    for (around, far_first) in [(now + 3 * 3_600_000, false), (now, true)] {
        if far_first {
            p.send("t", &"already far", Duration::from_secs(5 * 3600))
                .await
                .unwrap();
        }
        for b in minute(around) - 2..=minute(around) + 2 {
            let _: () = conn.set(format!("delayq:{{t}}:far:{b}"), "junk").unwrap();
        }
        let before = snapshot(&mut conn);
        let err = p
            .send_batch(
                "t",
                [
                    ("hot", Duration::ZERO),
                    ("far", Duration::from_secs(3 * 3600)),
                    ("hot too", Duration::ZERO),
                ],
            )
            .await
            .expect_err("the batch fails");
        assert!(
            matches!(&err, Error::WrongType { key, expected: "hash", found }
                if key.starts_with("delayq:{t}:far:") && found == "string"),
            "{err:?}"
        );
        let after = snapshot(&mut conn);
        let changed: Vec<_> = after
            .keys()
            .chain(before.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .collect();
        assert!(
            changed.is_empty(),
            "failed with {err}, yet wrote {changed:?}"
        );
        // Once the foreign keys are gone, the same batch is written whole.
        for b in minute(around) - 2..=minute(around) + 2 {
            let _: () = conn.del(format!("delayq:{{t}}:far:{b}")).unwrap();
        }
        let before = p.counts("t").await.unwrap().delayed;
        p.send_batch(
            "t",
            [
                ("hot", Duration::ZERO),
                ("far", Duration::from_secs(3 * 3600)),
                ("hot too", Duration::ZERO),
            ],
        )
        .await
        .unwrap();
        assert_eq!(p.counts("t").await.unwrap().delayed, before + 3);
    }
}
