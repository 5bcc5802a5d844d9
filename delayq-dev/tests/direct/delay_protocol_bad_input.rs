//! Bad input gets a clear error (or a dead letter) and writes nothing.

use std::time::Duration;

use delayq_core::{Error, SendOptions};
use delayq_dev::RedisServer;
use delayq_dev::{keys, plant_due, producer};

#[tokio::test]
async fn invalid_topics_are_rejected_before_anything_is_written() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    for topic in ["", "with space", "{tag}", "x/y", &"a".repeat(129)] {
        let err = p.send(topic, &1, Duration::ZERO).await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidTopic { .. }),
            "{topic:?}: {err}"
        );
        assert!(err.to_string().contains("A-Z a-z 0-9"), "{err}");
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.connection())
        .unwrap();
    assert!(keys.is_empty(), "wrote {keys:?}");
}

#[tokio::test]
async fn payload_limit_is_exact_and_checked_before_writing() {
    let server = RedisServer::start();
    let p = producer(&server).await.with_max_payload(1000);
    // A JSON string of n characters encodes to n + 2 bytes.
    let at_limit = "x".repeat(998);
    p.send("t", &at_limit, Duration::ZERO)
        .await
        .expect("exactly at the limit is accepted");
    let over = "x".repeat(999);
    let err = p.send("t", &over, Duration::ZERO).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::PayloadTooLarge {
                size: 1001,
                limit: 1000
            }
        ),
        "{err}"
    );
    // A batch with one payload over the limit writes none of them.
    let batch = vec![
        ("ok".to_string(), Duration::ZERO),
        (over.clone(), Duration::ZERO),
    ];
    assert!(matches!(
        p.send_batch("t", batch).await,
        Err(Error::PayloadTooLarge { .. })
    ));
    assert_eq!(p.counts("t").await.unwrap().delayed, 1);

    let default = producer(&server).await;
    let mib = "y".repeat(1024 * 1024 - 2);
    default
        .send("big", &mib, Duration::ZERO)
        .await
        .expect("1 MiB is accepted by default");
    let err = default
        .send("big", &format!("{mib}y"), Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PayloadTooLarge { .. }), "{err}");
}

#[tokio::test]
async fn a_foreign_key_of_the_wrong_type_is_named_in_the_error() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let k = keys("t");
    redis::cmd("SET")
        .arg(&k.delayed)
        .arg("someone else's")
        .query::<()>(&mut server.connection())
        .unwrap();
    let err = p.send("t", &1, Duration::ZERO).await.unwrap_err();
    match &err {
        Error::WrongType {
            key,
            expected,
            found,
        } => {
            assert_eq!(
                (key.as_str(), *expected, found.as_str()),
                (k.delayed.as_str(), "zset", "string")
            );
        }
        other => panic!("expected WrongType, got {other}"),
    }
    assert!(err.to_string().contains("delayq:{t}:delayed"), "{err}");
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    assert!(matches!(
        q.claim_due(10, Duration::from_secs(1)).await,
        Err(Error::WrongType { .. })
    ));
    // Other topics are unaffected.
    p.send("other", &1, Duration::ZERO).await.unwrap();
}

#[tokio::test]
async fn a_corrupt_envelope_goes_to_the_dead_letters_and_does_not_block_the_topic() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    plant_due(&server, "t", "bad", Some("not an envelope"));
    plant_due(&server, "t", "orphan", None);
    let good = p.send("t", &"fine", Duration::ZERO).await.unwrap();

    let batch = q.claim_due(10, Duration::from_secs(30)).await.unwrap();
    assert_eq!(batch.claimed.len(), 1);
    assert_eq!(batch.claimed[0].id, good);
    let mut bad: Vec<_> = batch
        .undeliverable
        .iter()
        .map(|(id, _)| id.as_str().to_string())
        .collect();
    bad.sort();
    assert_eq!(bad, ["bad", "orphan"]);

    let dead = p.dead_letters("t", 0..10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id.as_str(), "bad");
    assert_eq!(dead[0].payload, b"not an envelope");
    assert!(
        dead[0].reason.contains("does not parse"),
        "{}",
        dead[0].reason
    );
    assert!(
        dead[0].reason.contains("delayq:{t}:msg"),
        "{}",
        dead[0].reason
    );
    assert_eq!(
        p.counts("t").await.unwrap(),
        delayq_core::TopicCounts {
            delayed: 0,
            inflight: 1,
            dead: 1
        }
    );
}

#[tokio::test]
async fn bad_ids_and_options_are_rejected() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let err = p
        .send_with("t", &1, SendOptions::new().id(""))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidId { .. }), "{err}");
    let err = p
        .send_with("t", &1, SendOptions::new().max_attempts(0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidOption {
                option: "max_attempts",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(p.counts("t").await.unwrap().delayed, 0);
}

#[tokio::test]
async fn connection_errors_say_what_to_do() {
    let server = RedisServer::start();
    let port = server.port();
    drop(server);
    let url = format!("redis://127.0.0.1:{port}");
    let err = delayq_core::Producer::connect(&url).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{text}");
    // The URL came from the call, so the error says to fix the call, not the environment.
    assert!(
        text.contains(&url)
            && text.contains("Producer::connect")
            && !text.contains("DELAYQ_REDIS_URL"),
        "{text}"
    );

    let err = delayq_core::Producer::connect("http://nope")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidUrl { .. }), "{err}");
}

#[tokio::test]
async fn a_wrong_password_is_reported_as_such_and_not_echoed() {
    let server = RedisServer::builder()
        .config("requirepass", "right")
        .start();
    let url = format!("redis://:wrong@127.0.0.1:{}", server.port());
    let err = delayq_core::Producer::connect(&url).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Auth { .. }), "{text}");
    assert!(!text.contains("wrong@"), "password leaked: {text}");
    let ok = format!("redis://:right@127.0.0.1:{}", server.port());
    delayq_core::Producer::connect(&ok)
        .await
        .unwrap()
        .send("t", &1, Duration::ZERO)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_due_time_past_what_delayq_stores_is_refused_naming_the_limit() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let year_10000 = std::time::UNIX_EPOCH + Duration::from_millis(delayq_core::MAX_DUE_MS + 1);
    let id = p.send("t", &1, Duration::ZERO).await.unwrap();
    let errors = [
        p.send("t", &1, Duration::MAX).await.unwrap_err(),
        p.send("t", &1, Duration::from_secs(9_000 * 365 * 86_400))
            .await
            .unwrap_err(),
        p.send_at("t", &1, year_10000).await.unwrap_err(),
        p.send_batch("t", [(1, Duration::ZERO), (2, Duration::MAX)])
            .await
            .unwrap_err(),
        p.reschedule("t", &id, Duration::MAX).await.unwrap_err(),
    ];
    for err in errors {
        assert!(matches!(err, Error::DueTooFar { .. }), "{err}");
        assert!(err.to_string().contains("year 9999"), "{err}");
    }
    // The last moment that can be stored is accepted.
    let last = std::time::UNIX_EPOCH + Duration::from_millis(delayq_core::MAX_DUE_MS);
    p.send_at("t", &1, last).await.unwrap();
    let c = p.counts("t").await.unwrap();
    assert_eq!(
        c.delayed, 2,
        "only the first and the last send were written"
    );
}

/// A hand-edited header whose lengths add up past what a machine word holds: the claim reads
/// it as undeliverable (moved to the dead letters) instead of wrapping the sum and panicking
/// on the slice, and the good message beside it is delivered.
#[tokio::test]
async fn an_envelope_whose_lengths_overflow_is_undeliverable_not_a_panic() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    plant_due(
        &server,
        "t",
        "huge",
        Some("1 0 0 0 0 0 18446744073709551615 1\nab"),
    );
    let good = p.send("t", &"fine", Duration::ZERO).await.unwrap();

    let batch = q.claim_due(10, Duration::from_secs(30)).await.unwrap();
    assert_eq!(batch.claimed.len(), 1);
    assert_eq!(batch.claimed[0].id, good);
    assert_eq!(batch.undeliverable.len(), 1, "{:?}", batch.undeliverable);
    let (id, why) = &batch.undeliverable[0];
    assert_eq!(id.as_str(), "huge");
    assert!(why.contains("exceed"), "{why}");
    let counts = p.counts("t").await.unwrap();
    assert_eq!((counts.inflight, counts.dead), (1, 1), "{counts:?}");
}
