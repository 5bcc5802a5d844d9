//! One test per state change of the protocol, against a real redis-server.

use std::time::{Duration, SystemTime};

use delayq_core::protocol::NackOutcome;
use delayq_core::{Cancelled, SendOptions, SendOutcome};
use delayq_dev::RedisServer;
use delayq_dev::{envelope, keys, producer, score, sleep_ms, state};
use serde_json::json;

const LEASE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn send_puts_the_message_in_delayed_due_by_the_redis_clock() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let id = p
        .send("t", &json!({"order": 7}), Duration::from_millis(1500))
        .await
        .unwrap();
    assert_eq!(state(&server, "t", &id), "delayed");
    let env = envelope(&server, "t", &id).unwrap();
    assert_eq!(env.attempt, 0);
    assert_eq!(env.due_ms, env.enqueued_ms + 1500);
    assert_eq!(
        score(&server, &keys("t").delayed, &id),
        Some(env.due_ms as f64)
    );
    assert_eq!(env.payload, br#"{"order":7}"#);

    let at = SystemTime::now() + Duration::from_secs(60);
    let id2 = p.send_at("t", &1, at).await.unwrap();
    assert_eq!(
        envelope(&server, "t", &id2).unwrap().due_ms,
        delayq_core::protocol::time_to_ms(at)
    );
    assert_eq!(p.counts("t").await.unwrap().delayed, 2);
}

#[tokio::test]
async fn a_message_is_claimed_only_once_due() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let id = p.send("t", &"x", Duration::from_millis(400)).await.unwrap();
    let due = envelope(&server, "t", &id).unwrap().due_ms;

    let early = q.claim_due(10, LEASE).await.unwrap();
    assert!(early.claimed.is_empty(), "claimed before due");
    assert_eq!(early.next_due_ms, Some(due));
    assert!(early.now_ms < due);

    sleep_ms(450).await;
    let batch = q.claim_due(10, LEASE).await.unwrap();
    assert_eq!(batch.claimed.len(), 1);
    assert!(
        batch.now_ms >= due,
        "claimed at {} before due {}",
        batch.now_ms,
        due
    );
    let c = &batch.claimed[0];
    assert_eq!(c.id, id);
    assert_eq!((c.envelope.attempt, c.token()), (1, 1));
    assert_eq!(batch.next_due_ms, None);
    assert_eq!(state(&server, "t", &id), "inflight");
    let deadline = score(&server, &keys("t").inflight, &id).unwrap() as u64;
    assert_eq!(deadline, batch.now_ms + LEASE.as_millis() as u64);
}

#[tokio::test]
async fn an_ack_deletes_the_message_and_a_second_ack_is_stale() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let id = p.send("t", &"x", Duration::ZERO).await.unwrap();
    let c = q.claim_due(10, LEASE).await.unwrap().claimed.remove(0);
    assert_eq!(q.ack(&[c.receipt()]).await.unwrap(), vec![true]);
    assert_eq!(state(&server, "t", &id), "gone");
    assert_eq!(q.ack(&[c.receipt()]).await.unwrap(), vec![false]);
}

#[tokio::test]
async fn an_expired_claim_returns_to_delayed_and_the_next_delivery_counts_one_more_attempt() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let id = p.send("t", &"x", Duration::ZERO).await.unwrap();
    let first = q
        .claim_due(10, Duration::from_millis(100))
        .await
        .unwrap()
        .claimed
        .remove(0);

    let report = q.requeue_expired(100, 16).await.unwrap();
    assert_eq!(
        (report.requeued, report.dead),
        (0, 0),
        "requeued before its deadline"
    );
    assert!(report.next_deadline_ms.is_some());

    sleep_ms(150).await;
    let report = q.requeue_expired(100, 16).await.unwrap();
    assert_eq!((report.requeued, report.dead), (1, 0));
    assert_eq!(report.next_deadline_ms, None);
    assert_eq!(state(&server, "t", &id), "delayed");

    let second = q.claim_due(10, LEASE).await.unwrap().claimed.remove(0);
    assert_eq!(second.envelope.attempt, first.envelope.attempt + 1);
    assert_eq!(second.envelope.last_error, "ack deadline passed");
    // The late first delivery is fenced off: it cannot ack, extend or nack the second.
    assert_eq!(q.ack(&[first.receipt()]).await.unwrap(), vec![false]);
    assert_eq!(
        q.extend(LEASE, &[(id.clone(), first.token())])
            .await
            .unwrap(),
        vec![false]
    );
    let stale = q
        .nack(&id, first.token(), Duration::ZERO, "late", 16, None)
        .await
        .unwrap();
    assert_eq!(stale, NackOutcome::Stale);
    assert_eq!(state(&server, "t", &id), "inflight");
    assert_eq!(q.ack(&[second.receipt()]).await.unwrap(), vec![true]);
}

#[tokio::test]
async fn nack_retries_after_backoff_then_dead_letters_after_max_attempts() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let id = p.send("t", &json!({"n": 1}), Duration::ZERO).await.unwrap();

    let c1 = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    let out = q
        .nack(
            &id,
            c1.token(),
            Duration::from_millis(300),
            "boom 1",
            2,
            None,
        )
        .await
        .unwrap();
    assert_eq!(out, NackOutcome::Retry);
    assert_eq!(state(&server, "t", &id), "delayed");
    let env = envelope(&server, "t", &id).unwrap();
    assert_eq!(env.last_error, "boom 1");
    assert!(
        q.claim_due(1, LEASE).await.unwrap().claimed.is_empty(),
        "retried before the backoff"
    );
    sleep_ms(350).await;

    let c2 = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    assert_eq!(c2.envelope.attempt, 2);
    let out = q
        .nack(&id, c2.token(), Duration::ZERO, "boom 2", 2, None)
        .await
        .unwrap();
    assert_eq!(out, NackOutcome::Dead);
    assert_eq!(state(&server, "t", &id), "dead");

    let dead = p.dead_letters("t", 0..10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id, id);
    assert_eq!(dead[0].attempts, 2);
    assert_eq!(dead[0].last_error.as_deref(), Some("boom 2"));
    assert_eq!(dead[0].reason, "failed 2 of max_attempts 2");
    assert_eq!(
        dead[0].payload_as::<serde_json::Value>().unwrap(),
        json!({"n": 1})
    );
}

#[tokio::test]
async fn an_expired_claim_on_its_last_attempt_is_dead_lettered() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let opts = SendOptions::new().max_attempts(1);
    let id = p.send_with("t", &"x", opts).await.unwrap().id().clone();
    q.claim_due(1, Duration::from_millis(50)).await.unwrap();
    sleep_ms(100).await;
    // The message's own max_attempts (1) wins over the default (16).
    let report = q.requeue_expired(100, 16).await.unwrap();
    assert_eq!((report.requeued, report.dead), (0, 1));
    assert_eq!(state(&server, "t", &id), "dead");
    let dead = p.dead_letters("t", 0..1).await.unwrap();
    assert_eq!(
        dead[0].reason,
        "ack deadline passed on attempt 1 of max_attempts 1"
    );
}

#[tokio::test]
async fn dead_letter_now_skips_the_remaining_attempts() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let id = p.send("t", &"x", Duration::ZERO).await.unwrap();
    let c = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    let out = q
        .nack(&id, c.token(), Duration::ZERO, "", 16, Some("bad payload"))
        .await
        .unwrap();
    assert_eq!(out, NackOutcome::Dead);
    assert_eq!(
        p.dead_letters("t", 0..1).await.unwrap()[0].reason,
        "bad payload"
    );
}

#[tokio::test]
async fn cancel_in_each_state() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();

    let delayed = p.send("t", &"d", Duration::from_secs(60)).await.unwrap();
    assert_eq!(p.cancel("t", &delayed).await.unwrap(), Cancelled::Removed);
    assert_eq!(state(&server, "t", &delayed), "gone");
    assert_eq!(p.cancel("t", &delayed).await.unwrap(), Cancelled::NotFound);

    let inflight = p.send("t", &"i", Duration::ZERO).await.unwrap();
    let c = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    assert_eq!(p.cancel("t", &inflight).await.unwrap(), Cancelled::InFlight);
    assert_eq!(
        state(&server, "t", &inflight),
        "inflight",
        "cancel must not stop a running delivery"
    );

    q.ack(&[c.receipt()]).await.unwrap();
    assert_eq!(
        p.cancel("t", &inflight).await.unwrap(),
        Cancelled::NotFound,
        "acked"
    );

    let dead = p.send("t", &"x", Duration::ZERO).await.unwrap();
    let c = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    q.nack(&dead, c.token(), Duration::ZERO, "", 16, Some("test"))
        .await
        .unwrap();
    // A dead letter is not pending: cancel leaves it (API.md: dead letters go through
    // purge_dead), and says NotFound.
    assert_eq!(p.cancel("t", &dead).await.unwrap(), Cancelled::NotFound);
    assert_eq!(state(&server, "t", &dead), "dead");
    assert_eq!(p.purge_dead("t").await.unwrap(), 1);
    assert_eq!(state(&server, "t", &dead), "gone");

    let unknown = "never-sent".parse().unwrap();
    assert_eq!(p.cancel("t", &unknown).await.unwrap(), Cancelled::NotFound);
}

#[tokio::test]
async fn a_user_id_deduplicates_while_pending() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let opts = || {
        SendOptions::new()
            .id("order-7")
            .delay(Duration::from_secs(60))
    };
    let first = p.send_with("t", &"first", opts()).await.unwrap();
    assert!(matches!(&first, SendOutcome::Created(id) if id.as_str() == "order-7"));
    let again = p.send_with("t", &"second", opts()).await.unwrap();
    assert!(matches!(again, SendOutcome::Duplicate(_)));
    let env = envelope(&server, "t", first.id()).unwrap();
    assert_eq!(env.payload, br#""first""#, "a duplicate changes nothing");
    assert_eq!(p.counts("t").await.unwrap().delayed, 1);

    // In flight: still a duplicate, even with replace.
    p.reschedule("t", first.id(), Duration::ZERO).await.unwrap();
    let c = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    let replace = p
        .send_with("t", &"third", opts().replace(true))
        .await
        .unwrap();
    assert!(matches!(replace, SendOutcome::Duplicate(_)));
    // Done: the id is free again.
    q.ack(&[c.receipt()]).await.unwrap();
    let fresh = p.send_with("t", &"fourth", opts()).await.unwrap();
    assert!(matches!(fresh, SendOutcome::Created(_)));
}

#[tokio::test]
async fn replace_swaps_payload_and_due_time_of_a_pending_message() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let opts = SendOptions::new().id("job").delay(Duration::from_secs(60));
    p.send_with("t", &"old", opts.clone()).await.unwrap();
    let before = envelope(&server, "t", &"job".parse().unwrap()).unwrap();
    let out = p
        .send_with(
            "t",
            &"new",
            opts.delay(Duration::from_secs(600)).replace(true),
        )
        .await
        .unwrap();
    assert!(matches!(out, SendOutcome::Replaced(_)));
    // Ten minutes out, it waits in a far bucket: read it as `peek` does.
    let after = p.peek("t", 0..10).await.unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(&after[0].id, out.id());
    assert_eq!(after[0].payload, br#""new""#);
    let due_ms = after[0]
        .due_at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(due_ms >= before.due_ms + 539_000);
    assert_eq!(p.counts("t").await.unwrap().delayed, 1);
    // replace with no pending message simply creates it
    let created = p
        .send_with("t", &1, SendOptions::new().id("other").replace(true))
        .await
        .unwrap();
    assert!(matches!(created, SendOutcome::Created(_)));
}

#[tokio::test]
async fn reschedule_moves_only_pending_messages() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let id = p.send("t", &"x", Duration::from_secs(3600)).await.unwrap();
    assert!(p
        .reschedule("t", &id, Duration::from_millis(100))
        .await
        .unwrap());
    let env = envelope(&server, "t", &id).unwrap();
    assert!(env.due_ms <= env.enqueued_ms + 1000);
    assert_eq!(
        score(&server, &keys("t").delayed, &id),
        Some(env.due_ms as f64)
    );
    sleep_ms(150).await;
    let c = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    assert!(
        !p.reschedule("t", &id, Duration::ZERO).await.unwrap(),
        "in flight"
    );
    q.ack(&[c.receipt()]).await.unwrap();
    assert!(
        !p.reschedule("t", &id, Duration::ZERO).await.unwrap(),
        "done"
    );
}

#[tokio::test]
async fn replay_and_purge_dead_letters() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(p.send("t", &i, Duration::ZERO).await.unwrap());
    }
    for c in q.claim_due(10, LEASE).await.unwrap().claimed {
        q.nack(&c.id, c.token(), Duration::ZERO, "err", 16, Some("kill"))
            .await
            .unwrap();
    }
    assert_eq!(p.counts("t").await.unwrap().dead, 5);
    assert_eq!(p.dead_letters("t", 1..3).await.unwrap().len(), 2);

    assert!(p.replay_dead("t", &ids[0]).await.unwrap());
    assert!(
        !p.replay_dead("t", &ids[0]).await.unwrap(),
        "no longer dead"
    );
    assert_eq!(state(&server, "t", &ids[0]), "delayed");
    let env = envelope(&server, "t", &ids[0]).unwrap();
    assert_eq!((env.attempt, env.dead_reason.as_str()), (0, ""));
    let c = q.claim_due(10, LEASE).await.unwrap().claimed.remove(0);
    assert_eq!(
        c.envelope.attempt, 1,
        "a replay starts the attempt count afresh"
    );

    assert_eq!(p.replay_all_dead("t").await.unwrap(), 2 + 2);
    assert_eq!(p.counts("t").await.unwrap().delayed, 4);
    for c in q.claim_due(10, LEASE).await.unwrap().claimed {
        q.nack(&c.id, c.token(), Duration::ZERO, "", 16, Some("again"))
            .await
            .unwrap();
    }
    assert_eq!(p.purge_dead("t").await.unwrap(), 4);
    assert_eq!(
        p.counts("t").await.unwrap(),
        delayq_core::TopicCounts {
            delayed: 0,
            inflight: 1,
            dead: 0
        }
    );
    for id in &ids[1..] {
        assert_eq!(state(&server, "t", id), "gone");
    }
}

#[tokio::test]
async fn release_hands_claims_back_without_using_an_attempt() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let id = p.send("t", &"x", Duration::ZERO).await.unwrap();
    let c = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    assert_eq!(q.release(&[(id.clone(), c.token())]).await.unwrap(), 1);
    assert_eq!(state(&server, "t", &id), "delayed");
    assert_eq!(
        q.release(&[(id.clone(), c.token())]).await.unwrap(),
        0,
        "stale"
    );
    let again = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    assert_eq!(again.envelope.attempt, 1);
    assert!(again.token() > c.token());
}

#[tokio::test]
async fn extend_pushes_the_deadline_out() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let id = p.send("t", &"x", Duration::ZERO).await.unwrap();
    let c = q
        .claim_due(1, Duration::from_millis(200))
        .await
        .unwrap()
        .claimed
        .remove(0);
    for _ in 0..4 {
        sleep_ms(100).await;
        assert_eq!(
            q.extend(Duration::from_millis(200), &[(id.clone(), c.token())])
                .await
                .unwrap(),
            vec![true]
        );
        assert_eq!(q.requeue_expired(10, 16).await.unwrap().requeued, 0);
    }
    assert_eq!(state(&server, "t", &id), "inflight");
}

#[tokio::test]
async fn extend_never_moves_a_deadline_earlier() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let id = p.send("t", &"x", Duration::ZERO).await.unwrap();
    let c = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    let d = [(id.clone(), c.token())];
    // A user's extend(10 min), then the runtime's renewal with its 30 s lease.
    q.extend(Duration::from_secs(600), &d).await.unwrap();
    let extended = score(&server, &keys("t").inflight, &id).unwrap();
    assert_eq!(
        q.extend(LEASE, &d).await.unwrap(),
        vec![true],
        "still owned"
    );
    assert_eq!(
        score(&server, &keys("t").inflight, &id).unwrap(),
        extended,
        "a shorter renewal moved the deadline earlier"
    );
    q.extend(Duration::from_secs(900), &d).await.unwrap();
    assert!(score(&server, &keys("t").inflight, &id).unwrap() > extended);
}

#[tokio::test]
async fn a_resent_id_gets_a_new_token_so_a_stale_delivery_of_the_old_one_cannot_settle_it() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    let send = || p.send_with("t", &"x", SendOptions::new().id("order-7"));
    send().await.unwrap();
    // Delivery A stalls past its deadline; delivery B takes over and acks.
    let a = q
        .claim_due(1, Duration::from_millis(50))
        .await
        .unwrap()
        .claimed
        .remove(0);
    sleep_ms(80).await;
    q.requeue_expired(10, 16).await.unwrap();
    let b = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    assert_eq!(q.ack(&[b.receipt()]).await.unwrap(), vec![true]);
    // The id is sent again and claimed by C.
    assert!(matches!(send().await.unwrap(), SendOutcome::Created(_)));
    let c = q.claim_due(1, LEASE).await.unwrap().claimed.remove(0);
    assert!(
        c.token() > b.token() && b.token() > a.token(),
        "tokens {} {} {}",
        a.token(),
        b.token(),
        c.token()
    );
    // A wakes up: every settle it tries is stale, and C's message stays in flight.
    let stale = [(a.id.clone(), a.token())];
    assert_eq!(q.ack(&[a.receipt()]).await.unwrap(), vec![false]);
    assert_eq!(q.extend(LEASE, &stale).await.unwrap(), vec![false]);
    assert_eq!(
        q.nack(&a.id, a.token(), Duration::ZERO, "late", 16, None)
            .await
            .unwrap(),
        NackOutcome::Stale
    );
    assert_eq!(q.release(&stale).await.unwrap(), 0);
    assert_eq!(state(&server, "t", &c.id), "inflight");
    assert_eq!(envelope(&server, "t", &c.id).unwrap().token, c.token());
}
