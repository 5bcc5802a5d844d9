//! A claim keeps its fence token beside the envelope (`<id>\n` in `msg`) and writes the
//! envelope only when it ends; the in-flight set keeps one member at +inf so that Redis holds
//! it as a skiplist. These attack that from every side: claims an earlier build made, attempts
//! counted exactly, dedup windows, the skiplist member in every reader, hand-edited envelopes,
//! 20,000 in flight, a pause, a Redis restart. (Written in an adversarial review of the change;
//! each of its failures was fixed.)

use std::time::Duration;

use delayq_core::protocol::NackOutcome;
use delayq_core::{MessageId, SendOptions, SendOutcome};
use delayq_dev::{envelope, keys, producer, sleep_ms, state, RedisServer};

const LEASE: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_millis(60);

// ---------------------------------------------------------------- helpers

fn hkeys(server: &RedisServer, key: &str) -> Vec<String> {
    redis::cmd("HKEYS")
        .arg(key)
        .query(&mut server.connection())
        .unwrap()
}

/// Fields of `msg` that are token fields (`<id>\n`).
fn token_fields(server: &RedisServer, topic: &str) -> Vec<String> {
    hkeys(server, &keys(topic).msg)
        .into_iter()
        .filter(|f| f.ends_with('\n'))
        .collect()
}

fn raw_env(server: &RedisServer, topic: &str, id: &str) -> Option<Vec<u8>> {
    redis::cmd("HGET")
        .arg(keys(topic).msg)
        .arg(id)
        .query(&mut server.connection())
        .unwrap()
}

/// Writes what a claim of the earlier build left: the envelope rewritten (attempt + 1, the
/// claim's token in the header), the id in `inflight`, no `<id>\n` field.
fn old_style_claim(server: &RedisServer, topic: &str, id: &MessageId, token: u64, lease_ms: u64) {
    let k = keys(topic);
    let mut c = server.connection();
    let raw = raw_env(server, topic, id.as_str()).unwrap();
    let s = String::from_utf8(raw).unwrap();
    let (header, rest) = s.split_once('\n').unwrap();
    let mut f: Vec<String> = header.split(' ').map(str::to_string).collect();
    f[1] = (f[1].parse::<u64>().unwrap() + 1).to_string();
    f[2] = token.to_string();
    let bumped = format!("{}\n{rest}", f.join(" "));
    let now: Vec<u64> = redis::cmd("TIME").query(&mut c).unwrap();
    let now_ms = now[0] * 1000 + now[1] / 1000;
    let _: () = redis::pipe()
        .atomic()
        .zrem(&k.delayed, id.as_str())
        .zadd(&k.inflight, id.as_str(), now_ms + lease_ms)
        .hset(&k.msg, id.as_str(), bumped)
        .set(&k.seq, token)
        .query(&mut c)
        .unwrap();
}

// ---------------------------------------------------------------- old-build claims, new code

#[tokio::test]
async fn an_old_build_claim_is_settled_by_the_new_scripts() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "old";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    let send = |n: u32| {
        let p = p.clone();
        async move {
            match p
                .send_with(t, &n, SendOptions::new().max_attempts(2))
                .await
                .unwrap()
            {
                SendOutcome::Created(id) => id,
                o => panic!("{o:?}"),
            }
        }
    };
    // ack
    let a = send(1).await;
    old_style_claim(&server, t, &a, 50, 30_000);
    assert_eq!(q.ack(&[(a.clone(), 49, 0)]).await.unwrap(), vec![false]);
    assert_eq!(q.ack(&[(a.clone(), 50, 0)]).await.unwrap(), vec![true]);
    assert_eq!(state(&server, t, &a), "gone");
    // extend + nack: attempt already counted by the old claim, not counted twice
    let b = send(2).await;
    old_style_claim(&server, t, &b, 60, 30_000);
    assert_eq!(
        q.extend(LEASE, &[(b.clone(), 60)]).await.unwrap(),
        vec![true]
    );
    assert_eq!(
        q.extend(LEASE, &[(b.clone(), 59)]).await.unwrap(),
        vec![false]
    );
    assert_eq!(
        q.nack(&b, 60, Duration::ZERO, "e", 16, None).await.unwrap(),
        NackOutcome::Retry
    );
    assert_eq!(envelope(&server, t, &b).unwrap().attempt, 1);
    let c = q.claim_due(10, LEASE).await.unwrap().claimed.remove(0);
    assert_eq!((c.id.clone(), c.envelope.attempt), (b.clone(), 2));
    // max_attempts 2: the second failure kills it
    assert_eq!(
        q.nack(&b, c.token(), Duration::ZERO, "e", 16, None)
            .await
            .unwrap(),
        NackOutcome::Dead
    );
    assert_eq!(p.dead_letter(t, &b).await.unwrap().unwrap().attempts, 2);
    // release: attempt handed back
    let r = send(3).await;
    old_style_claim(&server, t, &r, 70, 30_000);
    assert_eq!(q.release(&[(r.clone(), 70)]).await.unwrap(), 1);
    let e = envelope(&server, t, &r).unwrap();
    assert_eq!((e.attempt, e.token), (0, 70));
    let cr = q.claim_due(10, LEASE).await.unwrap().claimed.remove(0);
    assert_eq!((cr.id.clone(), cr.envelope.attempt), (r.clone(), 1));
    assert_eq!(q.ack(&[cr.receipt()]).await.unwrap(), vec![true]);
    // expiry: the old claim's attempt counted once; with max_attempts 2, two expiries kill it
    let x = send(4).await;
    old_style_claim(&server, t, &x, 80, 1);
    sleep_ms(20).await;
    q.requeue_expired(100, 16).await.unwrap();
    assert_eq!(envelope(&server, t, &x).unwrap().attempt, 1);
    let got = q.claim_due(10, SHORT).await.unwrap().claimed;
    let cx = got.iter().find(|d| d.id == x).unwrap();
    assert_eq!(cx.envelope.attempt, 2);
    sleep_ms(120).await;
    let rep = q.requeue_expired(100, 16).await.unwrap();
    assert_eq!(state(&server, t, &x), "dead", "{rep:?}");
    assert_eq!(p.dead_letter(t, &x).await.unwrap().unwrap().attempts, 2);
    assert!(
        token_fields(&server, t).is_empty(),
        "{:?}",
        token_fields(&server, t)
    );
}

// ---------------------------------------------------------------- mixed fleet

/// Rolling upgrade (the layout version did not change, so both builds run on one namespace):
/// an old-build consumer whose claim expired acks late. Its (old) ack script checks the token
/// in the header; the new claim leaves the header's token as the old claim wrote it, so the
/// stale old delivery acks away the message a new-build consumer is running.
#[tokio::test]
async fn expiries_kill_after_exactly_max_attempts() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "exp";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    let id = match p
        .send_with(t, &1, SendOptions::new().max_attempts(3))
        .await
        .unwrap()
    {
        SendOutcome::Created(id) => id,
        o => panic!("{o:?}"),
    };
    let mut claims = 0;
    let mut attempts = vec![];
    for _ in 0..10 {
        let got = q.claim_due(10, SHORT).await.unwrap().claimed;
        if got.is_empty() {
            break;
        }
        claims += 1;
        attempts.push(got[0].envelope.attempt);
        sleep_ms(100).await;
        q.requeue_expired(100, 16).await.unwrap();
    }
    assert_eq!(claims, 3);
    assert_eq!(attempts, vec![1, 2, 3]);
    let d = p.dead_letter(t, &id).await.unwrap().unwrap();
    assert_eq!(d.attempts, 3, "{d:?}");
    let s = p.topic_stats(t).await.unwrap();
    assert_eq!((s.last_minute.retry, s.last_minute.dead), (2, 1));
    assert!(token_fields(&server, t).is_empty());
}

#[tokio::test]
async fn mixed_settlements_count_attempts_exactly() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "mixatt";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    let id = match p
        .send_with(t, &1, SendOptions::new().max_attempts(3))
        .await
        .unwrap()
    {
        SendOutcome::Created(id) => id,
        o => panic!("{o:?}"),
    };
    let claim = || async { q.claim_due(10, LEASE).await.unwrap().claimed.remove(0) };
    // 1: released (not counted)
    let c = claim().await;
    assert_eq!(c.envelope.attempt, 1);
    assert_eq!(q.release(&[(id.clone(), c.token())]).await.unwrap(), 1);
    // 1 again: retry_after (not counted)
    let c = claim().await;
    assert_eq!(c.envelope.attempt, 1);
    assert_eq!(
        q.retry_after(&id, c.token(), Duration::ZERO, "later")
            .await
            .unwrap(),
        NackOutcome::Retry
    );
    // 1 again: timed out (counted)
    let c = claim().await;
    assert_eq!(c.envelope.attempt, 1);
    assert_eq!(
        q.nack_timed_out(&id, c.token(), Duration::ZERO, "slow", 16)
            .await
            .unwrap(),
        NackOutcome::Retry
    );
    // 2: nack (counted)
    let c = claim().await;
    assert_eq!(c.envelope.attempt, 2);
    assert_eq!(
        q.nack(&id, c.token(), Duration::ZERO, "e", 16, None)
            .await
            .unwrap(),
        NackOutcome::Retry
    );
    // 3: stale settlements of older tokens change nothing; the 3rd failure kills it
    let c = claim().await;
    assert_eq!(c.envelope.attempt, 3);
    assert_eq!(
        q.nack(&id, c.token() - 1, Duration::ZERO, "e", 16, None)
            .await
            .unwrap(),
        NackOutcome::Stale
    );
    assert_eq!(
        q.nack(&id, c.token(), Duration::ZERO, "e", 16, None)
            .await
            .unwrap(),
        NackOutcome::Dead
    );
    assert_eq!(p.dead_letter(t, &id).await.unwrap().unwrap().attempts, 3);
    assert!(token_fields(&server, t).is_empty());
    // replayed: fresh attempts
    assert!(p.replay_dead(t, &id).await.unwrap());
    let c = claim().await;
    assert_eq!(c.envelope.attempt, 1);
}

// ---------------------------------------------------------------- dedup_for

#[tokio::test]
async fn dedup_window_reserved_after_ack_expiry_death_and_nack_death() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "dedup";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    let opts = |id: &str| {
        SendOptions::new()
            .id(id)
            .max_attempts(1)
            .dedup_for(Duration::from_secs(3600))
    };
    for id in ["acked", "expired", "nacked"] {
        p.send_with(t, &1, opts(id)).await.unwrap();
    }
    let got = q.claim_due(10, SHORT).await.unwrap().claimed;
    assert_eq!(got.len(), 3);
    for c in &got {
        match c.id.as_str() {
            "acked" => assert_eq!(q.ack(&[c.receipt()]).await.unwrap(), vec![true]),
            "nacked" => assert_eq!(
                q.nack(&c.id, c.token(), Duration::ZERO, "e", 16, None)
                    .await
                    .unwrap(),
                NackOutcome::Dead
            ),
            _ => {}
        }
    }
    sleep_ms(120).await;
    q.requeue_expired(100, 16).await.unwrap();
    for id in ["acked", "expired", "nacked"] {
        let again = p.send_with(t, &2, opts(id)).await.unwrap();
        assert!(
            matches!(again, SendOutcome::Duplicate(_)),
            "{id}: {again:?}"
        );
    }
    assert!(token_fields(&server, t).is_empty());
}

// ---------------------------------------------------------------- SKIPLIST visibility

#[tokio::test]
async fn the_skiplist_member_is_seen_nowhere() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "skip";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    let ids = ["a b", "ünï©ødé", &"x".repeat(256)];
    for id in ids {
        p.send_with(t, &1, SendOptions::new().id(id)).await.unwrap();
    }
    let got = q.claim_due(10, LEASE).await.unwrap().claimed;
    assert_eq!(got.len(), 3);
    assert_eq!(p.counts(t).await.unwrap().inflight, 3);
    assert_eq!(p.topic_stats(t).await.unwrap().inflight, 3);
    for c in &got {
        let f = p.find(t, &c.id).await.unwrap();
        assert_eq!(f.attempts, 1, "{f:?}");
        assert!(
            matches!(f.place, delayq_core::Place::InFlight { .. }),
            "{f:?}"
        );
    }
    // Claims moved by travel, then expired.
    delayq_core::protocol::travel(&p, t, 60_000, &[], 0, true)
        .await
        .unwrap();
    let rep = q.requeue_expired(100, 16).await.unwrap();
    assert_eq!((rep.requeued, rep.dead, rep.next_deadline_ms), (3, 0, None));
    let got = q.claim_due(10, LEASE).await.unwrap().claimed;
    assert_eq!(got.len(), 3);
    for c in &got {
        assert_eq!(c.envelope.attempt, 2);
    }
    let rs: Vec<_> = got.iter().map(|c| c.receipt()).collect();
    assert_eq!(q.ack(&rs).await.unwrap(), vec![true; 3]);
    let c = p.counts(t).await.unwrap();
    assert_eq!((c.delayed, c.inflight), (0, 0));
    let s = p.topic_stats(t).await.unwrap();
    assert_eq!((s.inflight, s.oldest_claim_deadline), (0, None));
    assert_eq!(
        delayq_core::protocol::idle_state(&p, t).await.unwrap(),
        (0, 0)
    );
    // travel with claims once nothing is in flight (only SKIPLIST at +inf)
    delayq_core::protocol::travel(&p, t, 60_000, &[], 0, true)
        .await
        .unwrap();
    let rep = q.requeue_expired(100, 16).await.unwrap();
    assert_eq!((rep.requeued, rep.dead, rep.next_deadline_ms), (0, 0, None));
    assert!(token_fields(&server, t).is_empty());
    assert!(hkeys(&server, &keys(t).msg).is_empty());
}

// ---------------------------------------------------------------- corrupt envelopes

fn put_delayed(server: &RedisServer, topic: &str, id: &str, raw: &[u8]) {
    let k = keys(topic);
    let _: () = redis::pipe()
        .hset(&k.msg, id, raw)
        .zadd(&k.delayed, id, 0)
        .query(&mut server.connection())
        .unwrap();
}

#[tokio::test]
async fn a_corrupt_envelope_starting_with_1_goes_dead_with_nothing_left_behind() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "corrupt";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    put_delayed(&server, t, "no-newline", b"1 garbage");
    put_delayed(&server, t, "prio", b"1 0 0 0 0 0 0 0 0 0 300\npayload");
    put_delayed(&server, t, "nope", b"{\"json\":1}");
    let good = p.send(t, &1, Duration::ZERO).await.unwrap();
    let batch = q.claim_due(10, LEASE).await.unwrap();
    assert_eq!(batch.claimed.len(), 1, "{batch:?}");
    assert_eq!(batch.claimed[0].id, good);
    assert_eq!(batch.undeliverable.len(), 3, "{batch:?}");
    for id in ["no-newline", "prio", "nope"] {
        let id = MessageId::new(id).unwrap();
        assert_eq!(state(&server, t, &id), "dead");
        // listing and finding it gives no error
        p.find(t, &id).await.unwrap();
    }
    p.dead_letters(t, 0..10).await.unwrap();
    assert_eq!(token_fields(&server, t), vec![format!("{good}\n")]);
}

/// A hand-edited attempt at the top of u32: the claim must not panic (the earlier build sent
/// it as "4294967296", which the client read back as 0; now the client adds 1 itself).
#[tokio::test]
async fn a_hand_edited_attempt_at_u32_max_is_no_panic() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "max";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    put_delayed(&server, t, "big", b"1 4294967295 0 0 0 0 0 0\n\"x\"");
    let q2 = q.clone();
    let r =
        tokio::spawn(async move { q2.claim_due(10, LEASE).await.map(|b| format!("{b:?}")) }).await;
    assert!(r.is_ok(), "claim_due panicked: {r:?}");
    let id = MessageId::new("big").unwrap();
    let s = state(&server, t, &id);
    assert!(s == "inflight" || s == "dead", "{s}");
}

/// A header Rust reads and Lua does not ("+0"): the delivery runs, and its own nack is refused.
#[tokio::test]
async fn a_header_only_rust_reads_settles_or_dies_at_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "plus";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    put_delayed(&server, t, "plus", b"1 +0 0 0 0 0 0 0\n\"x\"");
    let batch = q.claim_due(10, LEASE).await.unwrap();
    if let Some(c) = batch.claimed.first() {
        let out = q
            .nack(&c.id, c.token(), Duration::ZERO, "e", 16, None)
            .await
            .unwrap();
        assert_ne!(
            out,
            NackOutcome::Stale,
            "the delivery that owns the claim got Stale for its nack; state {}",
            state(&server, t, &c.id)
        );
    }
}

// ---------------------------------------------------------------- many in flight

#[tokio::test]
async fn many_in_flight_expire_and_count() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "many";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    let n = 20_000;
    let batch: Vec<(u32, Duration)> = (0..n).map(|i| (i, Duration::ZERO)).collect();
    for chunk in batch.chunks(1000) {
        p.send_batch(t, chunk.to_vec()).await.unwrap();
    }
    let mut claimed = 0;
    loop {
        let got = q.claim_due(1000, SHORT).await.unwrap().claimed.len();
        if got == 0 {
            break;
        }
        claimed += got;
    }
    assert_eq!(claimed, n as usize);
    assert_eq!(p.counts(t).await.unwrap().inflight, n as usize);
    sleep_ms(100).await;
    let mut requeued = 0;
    loop {
        let r = q.requeue_expired(5000, 16).await.unwrap();
        requeued += r.requeued;
        if r.requeued == 0 {
            break;
        }
    }
    assert_eq!(requeued, n as usize);
    assert!(token_fields(&server, t).is_empty());
    let c = p.counts(t).await.unwrap();
    assert_eq!((c.delayed, c.inflight), (n as usize, 0));
}

// ---------------------------------------------------------------- pause

/// A paused topic: claim_due claims nothing, and says so (the boss sleeps until a resume).
#[tokio::test]
async fn a_claim_on_a_paused_topic_is_no_error() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "paused";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    p.send(t, &1, Duration::ZERO).await.unwrap();
    assert!(p.pause(t).await.unwrap());
    let batch = q.claim_due(10, LEASE).await;
    assert!(batch.is_ok(), "claim_due on a paused topic: {batch:?}");
    let batch = batch.unwrap();
    assert!(batch.claimed.is_empty());
    assert!(p.resume(t).await.unwrap());
    assert_eq!(q.claim_due(10, LEASE).await.unwrap().claimed.len(), 1);
}

// ---------------------------------------------------------------- Redis restart

#[tokio::test]
async fn claims_survive_a_redis_restart() {
    let mut server = RedisServer::builder()
        .persistence(delayq_dev::Persistence::AofAlways)
        .start();
    let p = producer(&server).await;
    let t = "restart";
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    for i in 0..3 {
        p.send(t, &i, Duration::ZERO).await.unwrap();
    }
    let got = q.claim_due(10, SHORT).await.unwrap().claimed;
    assert_eq!(got.len(), 3);
    assert_eq!(q.ack(&[got[0].receipt()]).await.unwrap(), vec![true]);
    server.stop();
    server.restart();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    assert_eq!(p.counts(t).await.unwrap().inflight, 2);
    assert_eq!(q.ack(&[got[1].receipt()]).await.unwrap(), vec![true]);
    sleep_ms(100).await;
    let r = q.requeue_expired(100, 16).await.unwrap();
    assert_eq!((r.requeued, r.next_deadline_ms), (1, None));
    let again = q.claim_due(10, LEASE).await.unwrap().claimed;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].envelope.attempt, 2);
    assert_eq!(q.ack(&[got[2].receipt()]).await.unwrap(), vec![false]);
    assert_eq!(q.ack(&[again[0].receipt()]).await.unwrap(), vec![true]);
    assert!(hkeys(&server, &keys(t).msg).is_empty());
}
