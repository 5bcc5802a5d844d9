//! Results and waits under a running runtime: a handler's value is kept with its ack and read
//! back by `result`, `wait` and `send_and_wait`; every end (done, dead, cancelled, gone) ends a
//! wait, and a wait never outlives its timeout.

use std::time::{Duration, Instant};

use delayq_core::{Error, MessageId, Outcome, SendOptions, Unfinished};
use delayq_dev::RedisServer;
use delayq_dev::{producer, runtime, sleep_ms};
use delayq_runtime::{delay_listener, Ack};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Rendition {
    size: u32,
    url: String,
}

/// Returns a value: it is kept.
#[delay_listener(topic = "res.transcode", result_ttl = "2s", results_max = 5)]
async fn transcode(size: u32) -> Result<Rendition, String> {
    if size == 0 {
        return Err("size 0".into());
    }
    if size == 999 {
        sleep_ms(400).await;
    }
    Ok(Rendition {
        size,
        url: format!("https://cdn.example/{size}.mp4"),
    })
}

/// Returns no value: nothing is kept, but a wait hears its end.
#[delay_listener(topic = "res.unit")]
async fn unit(ms: u64) {
    sleep_ms(ms).await;
}

/// Dies at once.
#[delay_listener(topic = "res.dies", max_attempts = 1)]
async fn dies(_: u32) -> Result<u32, String> {
    Err("it broke".into())
}

/// Keeps by hand.
#[delay_listener(topic = "res.manual")]
async fn manual(n: u32, ack: Ack) {
    ack.ack_with(&(n * 2)).await.unwrap();
}

const TOPICS: &[&str] = &["res.transcode", "res.unit", "res.dies", "res.manual"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_are_kept_and_every_end_ends_a_wait() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, TOPICS).await;
    let t = Duration::from_secs(10);

    // send_and_wait: the value.
    let r: Rendition = p.send_and_wait("res.transcode", &720u32, t).await.unwrap();
    assert_eq!(r.size, 720);
    // result: the same, kept.
    let id = p
        .send("res.transcode", &1080u32, Duration::ZERO)
        .await
        .unwrap();
    let done: Outcome<Rendition> = p.wait("res.transcode", &id, t).await.unwrap();
    assert_eq!(
        done,
        Outcome::Done(Rendition {
            size: 1080,
            url: "https://cdn.example/1080.mp4".into()
        })
    );
    let kept: Outcome<Rendition> = p.result("res.transcode", &id).await.unwrap();
    assert_eq!(kept, done);
    // Read as any JSON.
    let any: Outcome<serde_json::Value> = p.result("res.transcode", &id).await.unwrap();
    assert!(matches!(any, Outcome::Done(v) if v["size"] == 1080));
    // A wrong type: a clear error naming the message.
    let wrong = p.result::<Vec<u8>>("res.transcode", &id).await.unwrap_err();
    assert!(matches!(wrong, Error::ResultDecode { .. }), "{wrong}");
    assert!(wrong.to_string().contains(id.as_str()), "{wrong}");

    // A failed run retried until it is dead: the wait ends with the reason.
    let id = p.send("res.dies", &1u32, Duration::ZERO).await.unwrap();
    let dead: Outcome<u32> = p.wait("res.dies", &id, t).await.unwrap();
    assert!(matches!(&dead, Outcome::Dead { .. }), "{dead:?}");
    assert_eq!(p.result::<u32>("res.dies", &id).await.unwrap(), dead);
    let err = p
        .send_and_wait::<_, u32>("res.dies", &2u32, t)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotDone {
                outcome: Unfinished::Dead(_),
                ..
            }
        ),
        "{err}"
    );

    // Cancelled before it ran: the wait ends, and the topic (whose listener keeps results)
    // keeps the outcome.
    let id = p
        .send("res.transcode", &5u32, Duration::from_secs(3600))
        .await
        .unwrap();
    let (waited, cancelled) = tokio::join!(p.wait::<Rendition>("res.transcode", &id, t), async {
        sleep_ms(200).await;
        p.cancel("res.transcode", &id).await.unwrap()
    });
    assert_eq!(cancelled, delayq_core::Cancelled::Removed);
    assert_eq!(waited.unwrap(), Outcome::Cancelled);
    assert_eq!(
        p.result::<Rendition>("res.transcode", &id).await.unwrap(),
        Outcome::Cancelled
    );

    // A unit handler: the wait hears its end (kept a minute for a wait that missed its
    // announcement); one nobody waited for keeps nothing.
    let id = p.send("res.unit", &300u64, Duration::ZERO).await.unwrap();
    let heard: Outcome<()> = p.wait("res.unit", &id, t).await.unwrap();
    assert_eq!(heard, Outcome::Done(()));
    assert_eq!(
        p.result::<()>("res.unit", &id).await.unwrap(),
        Outcome::Done(())
    );
    let id = p.send("res.unit", &0u64, Duration::ZERO).await.unwrap();
    let deadline = Instant::now() + t;
    loop {
        let c = p.counts("res.unit").await.unwrap();
        if c.delayed + c.inflight == 0 {
            break;
        }
        assert!(Instant::now() < deadline);
        sleep_ms(10).await;
    }
    assert_eq!(
        p.result::<()>("res.unit", &id).await.unwrap(),
        Outcome::Unknown
    );
    let () = p.send_and_wait("res.unit", &0u64, t).await.unwrap();

    // Manual ack with a value.
    let doubled: u32 = p.send_and_wait("res.manual", &21u32, t).await.unwrap();
    assert_eq!(doubled, 42);

    // Never sent: at once.
    let started = Instant::now();
    let never = MessageId::new("never-sent").unwrap();
    assert_eq!(
        p.wait::<u32>("res.transcode", &never, t).await.unwrap(),
        Outcome::Unknown
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    // A timeout: Pending, on time.
    let id = p
        .send("res.transcode", &7u32, Duration::from_secs(3600))
        .await
        .unwrap();
    let started = Instant::now();
    let pending: Outcome<Rendition> = p
        .wait("res.transcode", &id, Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(pending, Outcome::Pending);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let err = p
        .send_with_and_wait::<_, Rendition>(
            "res.transcode",
            &8u32,
            SendOptions::new().delay(Duration::from_secs(3600)),
            Duration::from_millis(200),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotDone {
                outcome: Unfinished::TimedOut,
                ..
            }
        ),
        "{err}"
    );

    // Nothing stands once the waits ended.
    assert_eq!(p.standing_waits().0, 0);
    rt.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_expire_and_are_bounded() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["res.transcode"]).await;
    let t = Duration::from_secs(10);
    let mut ids = Vec::new();
    for size in 1..=8u32 {
        let id = p
            .send("res.transcode", &size, Duration::ZERO)
            .await
            .unwrap();
        let _: Outcome<Rendition> = p.wait("res.transcode", &id, t).await.unwrap();
        ids.push(id);
    }
    // results_max = 5: the three oldest were dropped, and counted.
    let mut kept = 0;
    for (i, id) in ids.iter().enumerate() {
        let o: Outcome<Rendition> = p.result("res.transcode", id).await.unwrap();
        if i < 3 {
            assert_eq!(o, Outcome::Unknown, "result {i} was kept past results_max");
        } else {
            assert!(matches!(o, Outcome::Done(_)), "result {i}: {o:?}");
            kept += 1;
        }
    }
    assert_eq!(kept, 5);
    let mut c = server.connection();
    let dropped: Option<u64> = redis::cmd("HGET")
        .arg("delayq:{res.transcode}:farinfo")
        .arg("results_dropped")
        .query(&mut c)
        .unwrap();
    assert_eq!(dropped, Some(3));
    // result_ttl = 2s: after it, unknown.
    sleep_ms(2_200).await;
    let o: Outcome<Rendition> = p.result("res.transcode", &ids[7]).await.unwrap();
    assert_eq!(o, Outcome::Unknown);
    rt.shutdown().await.unwrap();
}

/// The caller is slow (every reply to it arrives 300 ms late) and the handler fast: the
/// message has ended, keeping nothing, before the caller's own look. The wait registered
/// before the send hears the end all the same. (Registered after the send, it heard nothing
/// and ended `Unknown`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_and_wait_hears_an_end_that_beat_a_slow_caller() {
    let server = RedisServer::start();
    let rt = runtime(&server, &["res.unit"]).await;
    let proxy = delayq_dev::BlackholeProxy::start(server.port());
    let p = delayq_core::Producer::connect(&proxy.url()).await.unwrap();
    p.send("res.unit", &0u64, Duration::from_secs(3600))
        .await
        .unwrap();
    proxy.delay_replies(Duration::from_millis(300));
    for _ in 0..5 {
        let () = p
            .send_and_wait("res.unit", &0u64, Duration::from_secs(4))
            .await
            .unwrap();
    }
    rt.shutdown().await.unwrap();
}
