//! Waits under attack: a subscriber connection killed while waits stand, thousands of waits
//! at once from one producer (bounded connections and memory, nothing left behind), and
//! hand-edited or foreign result keys.

use std::time::{Duration, Instant};

use delayq_core::{Error, MessageId, Outcome};
use delayq_dev::RedisServer;
use delayq_dev::{producer, runtime, sleep_ms};
use delayq_runtime::delay_listener;

#[delay_listener(topic = "atk.value", concurrency = 200)]
async fn value(n: u32) -> Result<u32, String> {
    Ok(n + 1)
}

fn clients(c: &mut redis::Connection, kind: &str) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg(kind)
        .query(c)
        .unwrap();
    list.lines().count()
}

/// The end is announced while the producer's subscriber is cut off: the wait still ends
/// with the kept value once it subscribes again (it reads what it missed), well before its
/// timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_survives_its_subscriber_being_killed() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["atk.value"]).await;
    let mut c = server.connection();
    let id = p
        .send("atk.value", &1u32, Duration::from_millis(800))
        .await
        .unwrap();
    let started = Instant::now();
    let (waited, ()) = tokio::join!(
        p.wait::<u32>("atk.value", &id, Duration::from_secs(30)),
        async {
            // Kill the waits' subscriber (and the runtime's) over and over around the end.
            for _ in 0..12 {
                sleep_ms(100).await;
                let _: redis::Value = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("pubsub")
                    .query(&mut c)
                    .unwrap();
            }
        }
    );
    assert_eq!(waited.unwrap(), Outcome::Done(2));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the wait took {:?}",
        started.elapsed()
    );
    rt.shutdown().await.unwrap();
}

/// 10,000 waits at once from one producer share one subscriber connection, all end with
/// their values, and leave no wait behind, in the process or in Redis. (Sent due now, run
/// once every wait stands: no runtime runs until then.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_waits_share_one_connection_and_leave_nothing() {
    const N: u32 = 10_000;
    let server = RedisServer::start();
    let p = producer(&server).await;
    let mut c = server.connection();
    let before = clients(&mut c, "normal") + clients(&mut c, "pubsub");
    let ids = p
        .send_batch("atk.value", (0..N).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    let waits = ids.iter().map(|id| {
        let p = p.clone();
        let id = id.clone();
        async move {
            p.wait::<u32>("atk.value", &id, Duration::from_secs(120))
                .await
        }
    });
    let all = tokio::spawn(futures_util::future::join_all(waits));
    // Every wait registered (in the process and in Redis) before anything runs.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let standing: u64 = redis::cmd("ZCARD")
            .arg("delayq:{atk.value}:waits")
            .query(&mut c)
            .unwrap();
        if standing == u64::from(N) {
            break;
        }
        assert!(Instant::now() < deadline, "{standing} waits registered");
        sleep_ms(50).await;
    }
    assert_eq!(p.standing_waits(), (N as usize, 1));
    let pubsub = clients(&mut c, "pubsub");
    let after = clients(&mut c, "normal") + pubsub;
    println!("connections: {before} before, {after} with {N} waits standing ({pubsub} pub/sub)");
    assert_eq!(pubsub, 1, "one subscriber connection for all the waits");
    assert!(
        after <= before + 3,
        "{before} connections before, {after} with the waits"
    );
    // Now they run.
    let rt = runtime(&server, &["atk.value"]).await;
    let outcomes = all.await.unwrap();
    for (n, o) in outcomes.into_iter().enumerate() {
        assert_eq!(o.unwrap(), Outcome::Done(n as u32 + 1));
    }
    assert_eq!(p.standing_waits(), (0, 0));
    let left: u64 = redis::cmd("ZCARD")
        .arg("delayq:{atk.value}:waits")
        .query(&mut c)
        .unwrap();
    assert_eq!(left, 0, "waits left in Redis after their messages ended");
    // The subscriber goes when the last wait does.
    let deadline = Instant::now() + Duration::from_secs(10);
    while clients(&mut c, "pubsub") > 1 {
        assert!(Instant::now() < deadline, "the waits' subscriber stayed");
        sleep_ms(50).await;
    }
    rt.shutdown().await.unwrap();
}

/// Waits that time out leave entries in Redis only until later calls drop them; a producer
/// that gave up leaves nothing that grows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_waits_are_dropped_from_redis() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let mut c = server.connection();
    let ids = p
        .send_batch(
            "atk.value",
            (0..3_000u32).map(|n| (n, Duration::from_secs(3600))),
        )
        .await
        .unwrap();
    let waits = ids.iter().map(|id| {
        let p = p.clone();
        let id = id.clone();
        async move {
            p.wait::<u32>("atk.value", &id, Duration::from_millis(500))
                .await
        }
    });
    for o in futures_util::future::join_all(waits).await {
        assert_eq!(o.unwrap(), Outcome::Pending);
    }
    let standing: u64 = redis::cmd("ZCARD")
        .arg("delayq:{atk.value}:waits")
        .query(&mut c)
        .unwrap();
    assert!(standing <= 3_000);
    // An entry's time is the wait's timeout from when Redis registered it (a little after the
    // wait began, 3,000 of them queued at once). Each later wait drops up to 1,000 expired.
    sleep_ms(1_500).await;
    for _ in 0..3 {
        let _ = p
            .wait::<u32>("atk.value", &ids[0], Duration::from_millis(100))
            .await
            .unwrap();
        sleep_ms(5).await;
    }
    let standing: u64 = redis::cmd("ZCARD")
        .arg("delayq:{atk.value}:waits")
        .query(&mut c)
        .unwrap();
    assert!(standing <= 1, "{standing} expired waits left");
}

/// A hand-edited result reads as unknown (no panic, no error); a foreign key where results
/// are kept is named in the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_edited_and_foreign_result_keys() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let mut c = server.connection();
    let id = MessageId::new("edited").unwrap();
    redis::cmd("HSET")
        .arg("delayq:{atk.value}:results")
        .arg("edited")
        .arg("garbage without a header")
        .query::<()>(&mut c)
        .unwrap();
    redis::cmd("ZADD")
        .arg("delayq:{atk.value}:results:by")
        .arg("nan")
        .arg("edited")
        .query::<()>(&mut c)
        .ok();
    assert_eq!(
        p.result::<u32>("atk.value", &id).await.unwrap(),
        Outcome::Unknown
    );
    redis::cmd("SET")
        .arg("delayq:{atk.other}:results:by")
        .arg("x")
        .query::<()>(&mut c)
        .unwrap();
    let err = p.result::<u32>("atk.other", &id).await.unwrap_err();
    assert!(
        matches!(&err, Error::WrongType { key, .. } if key == "delayq:{atk.other}:results:by"),
        "{err}"
    );
    redis::cmd("SET")
        .arg("delayq:{atk.third}:waits")
        .arg("x")
        .query::<()>(&mut c)
        .unwrap();
    let sent = p
        .send("atk.third", &1u32, Duration::from_secs(60))
        .await
        .unwrap();
    let err = p
        .wait::<u32>("atk.third", &sent, Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::WrongType { key, .. } if key == "delayq:{atk.third}:waits"),
        "{err}"
    );
}
