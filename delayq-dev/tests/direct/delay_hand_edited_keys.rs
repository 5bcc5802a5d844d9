//! Sends, schedule ticks and nacks against messages in every state, and against records edited
//! by hand or keys written by another program: what each call answers, and what is then
//! delivered. From two adversarial reviews; all but the first failed on 48844ab: send.lua, tick.lua
//! and nack.lua now check the far buckets they write before their first write, send.lua looks
//! everything up before it writes, and a `where` entry counts only when its bucket holds the id.

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

/// Every key of the test's server and its content (DUMP of a hash table depends on its
/// layout, which a read's rehash step moves).
fn snapshot(conn: &mut redis::Connection) -> BTreeMap<String, Vec<u8>> {
    // By content (DUMP of a hash table depends on its layout, which a read's rehash step moves).
    let names: Vec<String> = conn.keys("*").unwrap();
    names
        .into_iter()
        .map(|k| {
            let t: String = redis::cmd("TYPE").arg(&k).query(conn).unwrap();
            let v: Vec<Vec<u8>> = match t.as_str() {
                "hash" => {
                    let mut v: Vec<(Vec<u8>, Vec<u8>)> = conn.hgetall(&k).unwrap();
                    v.sort();
                    v.into_iter().flat_map(|(a, b)| [a, b]).collect()
                }
                "zset" => conn
                    .zrange_withscores::<_, Vec<(Vec<u8>, f64)>>(&k, 0, -1)
                    .unwrap()
                    .into_iter()
                    .flat_map(|(a, b)| [a, b.to_string().into_bytes()])
                    .collect(),
                "string" => vec![conn.get(&k).unwrap()],
                "list" => conn.lrange(&k, 0, -1).unwrap(),
                _ => {
                    let mut v: Vec<Vec<u8>> = conn.smembers(&k).unwrap_or_default();
                    v.sort();
                    v
                }
            };
            let mut flat = t.into_bytes();
            for x in v {
                flat.push(0);
                flat.extend(x);
            }
            (k, flat)
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

/// A message on topic `t` due in `hours` (so that `far` exists), and an hourly schedule `sch`
/// into `t`, read back.
async fn far_message_and_hourly_schedule(
    p: &delayq_core::Producer,
    hours: u64,
) -> (MessageId, delayq_core::protocol::ScheduleState) {
    let other = p
        .send("t", &"other", Duration::from_secs(hours * 3600))
        .await
        .unwrap();
    let every_hour = delayq_core::Schedule::every(Duration::from_secs(3600)).unwrap();
    p.upsert_schedule("sch", every_hour, "t", &"x")
        .await
        .unwrap();
    (other, p.schedule_state("sch").await.unwrap().unwrap())
}

/// Claims and acks everything due, travelling `hops` times an hour and a bit; the payloads.
async fn drain(p: &delayq_core::Producer, topic: &str, hops: usize) -> Vec<String> {
    let q = queue(p, topic).unwrap();
    let mut delivered = Vec::new();
    for _ in 0..hops {
        loop {
            let c = q.claim_due(100, LEASE).await.unwrap().claimed;
            if c.is_empty() {
                break;
            }
            for d in &c {
                delivered.push(format!(
                    "{}={}",
                    d.id,
                    String::from_utf8(d.envelope.payload.clone()).unwrap()
                ));
            }
            let receipts: Vec<_> = c.iter().map(|d| d.receipt()).collect();
            q.ack(&receipts).await.unwrap();
        }
        travel(p, topic, 3_700_000, &[], 0, false).await.unwrap();
    }
    delivered
}

/// tick.lua: a far bucket of another type where a schedule's second tick goes. The call fails;
/// once the key is gone the schedule goes on; every tick is then delivered once.
#[tokio::test]
async fn a_tick_meeting_a_far_bucket_of_another_type_is_not_lost() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let hour = 3_600_000u64;
    // Another far message (due later than every tick here), so that `far` exists.
    let (other, mut s) = far_message_and_hourly_schedule(&p, 6).await;
    let first = s.next;
    let mut conn = server.connection();
    let junk = format!("delayq:{{t}}:far:{}", (first + hour) / 60_000);
    let _: () = conn.set(&junk, "junk").unwrap();
    let now = p.redis_now_ms().await.unwrap();
    let got = p.produce_ticks(&mut s, now, 3 * hour).await;
    eprintln!("with the junk key: {got:?}");
    assert!(
        matches!(&got, Err(Error::WrongType { key, .. }) if *key == junk),
        "{got:?}"
    );
    let after_fail: Vec<String> = conn.keys("delayq:{t}:*").unwrap();
    let far_members: Vec<String> = conn.zrange(keys("t").far, 0, -1).unwrap();
    let count: Option<i64> = conn.hget(keys("t").farinfo, "count").unwrap();
    eprintln!("keys {after_fail:?}; far {far_members:?}; count {count:?}");
    let _: () = conn.del(&junk).unwrap();
    let mut s = p.schedule_state("sch").await.unwrap().unwrap();
    let now = p.redis_now_ms().await.unwrap();
    let got = p.produce_ticks(&mut s, now, 3 * hour).await.unwrap();
    eprintln!("then: {got:?}");
    let delivered = drain(&p, "t", 8).await;
    eprintln!("delivered {delivered:?}");
    let ids: Vec<String> = delivered
        .iter()
        .map(|d| d.split('=').next().unwrap().to_string())
        .collect();
    let expected: Vec<String> = match &got {
        delayq_core::protocol::Produced::Ticks { ticks, .. } => {
            ticks.iter().map(|t| format!("sch@{t}")).collect()
        }
        _ => vec![],
    };
    let mut want = vec![format!("sch@{first}")];
    for t in expected {
        if !want.contains(&t) {
            want.push(t);
        }
    }
    want.push(other.to_string());
    let mut ids = ids;
    ids.sort();
    want.sort();
    assert_eq!(ids, want, "first tick at {first}");
}

/// tick.lua with a dangling `where` entry for a tick's id: the tick is written.
#[tokio::test]
async fn a_tick_with_a_dangling_where_entry_is_written() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let (_, mut s) = far_message_and_hourly_schedule(&p, 3).await;
    let first = s.next;
    let mut conn = server.connection();
    let b: i64 = conn.zrange::<_, Vec<i64>>(keys("t").far, 0, 0).unwrap()[0];
    let _: () = conn
        .hset(keys("t").far_index, format!("sch@{first}"), b)
        .unwrap();
    let now = p.redis_now_ms().await.unwrap();
    let got = p
        .produce_ticks(&mut s, now, 3_600_000 + 60_000)
        .await
        .unwrap();
    eprintln!("{got:?}");
    let delivered = drain(&p, "t", 5).await;
    assert!(
        delivered
            .iter()
            .any(|d| d.starts_with(&format!("sch@{first}="))),
        "{delivered:?}"
    );
}

/// nack.lua: a long backoff into a far bucket of another type. The nack fails; the message
/// must still be somewhere it will be delivered from (in flight until its lease ends, or
/// delayed).
#[tokio::test]
async fn a_nack_into_a_far_bucket_of_another_type_loses_no_message() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = queue(&p, "t").unwrap();
    p.send_with("t", &"m", opts("m")).await.unwrap();
    let c = q
        .claim_due(10, Duration::from_millis(200))
        .await
        .unwrap()
        .claimed;
    assert_eq!(c.len(), 1);
    let now = p.redis_now_ms().await.unwrap();
    let mut conn = server.connection();
    let backoff = 3 * 3_600_000u64;
    for b in (now + backoff) / 60_000 - 1..=(now + backoff) / 60_000 + 1 {
        let _: () = conn.set(format!("delayq:{{t}}:far:{b}"), "junk").unwrap();
    }
    let r = q
        .nack(
            &c[0].id,
            c[0].token(),
            Duration::from_millis(backoff),
            "boom",
            5,
            None,
        )
        .await;
    eprintln!("nack: {r:?}");
    assert!(
        matches!(&r, Err(Error::WrongType { key, .. }) if key.starts_with("delayq:{t}:far:")),
        "{r:?}"
    );
    let k = keys("t");
    let st: (Option<f64>, Option<f64>, bool) = (
        conn.zscore(&k.inflight, "m").unwrap(),
        conn.zscore(&k.delayed, "m").unwrap(),
        conn.hexists(&k.msg, "m").unwrap(),
    );
    let st = format!(
        "inflight {:?}, delayed {:?}, envelope in msg {}",
        st.0, st.1, st.2
    );
    for b in (now + backoff) / 60_000 - 1..=(now + backoff) / 60_000 + 1 {
        let _: () = conn.del(format!("delayq:{{t}}:far:{b}")).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = q.requeue_expired(100, 5).await;
    let delivered = drain(&p, "t", 5).await;
    assert_eq!(
        delivered,
        vec!["m=\"m\"".to_string()],
        "after the failed nack its state was {st}"
    );
}

/// A `where` entry that is not a bucket number ("x", "nan", "inf", ...): a send, cancel and
/// find of the id go on as for an id with no entry.
#[tokio::test]
async fn a_where_entry_that_is_not_a_bucket_number_is_ignored() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send("t", &"far", Duration::from_secs(3 * 3600))
        .await
        .unwrap();
    let mut conn = server.connection();
    let mut bad = Vec::new();
    for v in ["x", "nan", "inf", "-inf", "1e400", "0x10"] {
        let _: () = conn.hset(keys("t").far_index, "u", v).unwrap();
        let r = p.send_with("t", &"u", opts("u").replace(true)).await;
        eprintln!("where u = {v}: {r:?}");
        if r.is_err() {
            bad.push(format!("{v}: {r:?}"));
        }
        let c = p.cancel("t", &id("u")).await;
        eprintln!("  cancel: {c:?}");
        let f = p.find("t", &id("u")).await;
        if f.is_err() {
            bad.push(format!("find {v}: {f:?}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// A reschedule into a far bucket of another type fails naming that bucket, and leaves the
/// message where it was (it wrote the bucket's width first, and the error was Redis' own);
/// the error names the bucket even when a key the call never touches is foreign too.
#[tokio::test]
async fn a_reschedule_into_a_far_bucket_of_another_type_changes_nothing() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send_with("t", &"m", opts("m").delay(Duration::from_secs(60)))
        .await
        .unwrap();
    let mut conn = server.connection();
    let _: () = conn.set(keys("t").history, "foreign too").unwrap();
    let now = time_to_ms(SystemTime::now());
    let delay = 3 * 3_600_000u64;
    for b in (now + delay) / 60_000 - 2..=(now + delay) / 60_000 + 2 {
        let _: () = conn.set(format!("delayq:{{t}}:far:{b}"), "junk").unwrap();
    }
    let before = snapshot(&mut conn);
    let r = p
        .reschedule("t", &id("m"), Duration::from_millis(delay))
        .await;
    assert!(
        matches!(&r, Err(Error::WrongType { key, expected: "hash", found })
            if key.starts_with("delayq:{t}:far:") && found == "string"),
        "{r:?}"
    );
    assert_eq!(snapshot(&mut conn), before, "the failed reschedule wrote");
    assert_eq!(state(&server, "t", &id("m")), "delayed");
}
