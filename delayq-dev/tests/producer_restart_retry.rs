//! After a Redis restart the producer's connection is dead; the calls a second run cannot
//! change (a send, whose id the client made or was given, and the reads) are retried once on
//! the new connection, so the first call after the restart succeeds, and a message sent once
//! still arrives once. A call that is not idempotent is not retried.

use std::time::Duration;

use delayq_core::{Cancelled, Place, Producer, SendOptions, SendOutcome};
use delayq_dev::{producer, runtime, Persistence, RedisServer, Seen};
use delayq_runtime::delay_listener;

static ONCE: Seen<String> = Seen::new();

#[delay_listener(topic = "retry.once", concurrency = 4)]
async fn once(payload: String) {
    ONCE.push(payload);
}

/// Stops the server (SIGTERM: the AOF is written) and starts it again on the same port.
fn restart(server: &mut RedisServer) {
    server.stop();
    server.restart();
}

/// A producer that has sent to `topic` once (layout checked, topic registered, script
/// loaded): what it sends next goes straight to the script call.
async fn warm(server: &RedisServer, topic: &str) -> Producer {
    let p = producer(server).await;
    p.send_with(topic, "warm", SendOptions::new().id("warm"))
        .await
        .unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_idempotent_call_after_a_restart_succeeds() {
    let mut server = RedisServer::builder()
        .persistence(Persistence::AofAlways)
        .start();
    let t = "retry.calls";
    let p = warm(&server, t).await;
    let with_id = SendOptions::new().id("mine").delay(Duration::from_secs(60));

    restart(&mut server);
    let sent = p.send_with(t, "a", with_id.clone()).await;
    assert!(
        matches!(sent, Ok(SendOutcome::Created(_))),
        "send_with(id): {sent:?}"
    );
    restart(&mut server);
    let generated = p.send(t, "b", Duration::from_secs(60)).await;
    assert!(generated.is_ok(), "send with a generated id: {generated:?}");
    restart(&mut server);
    let batch = p
        .send_batch(t, ["c", "d"].map(|s| (s, Duration::from_secs(60))))
        .await;
    assert!(batch.is_ok(), "send_batch: {batch:?}");
    restart(&mut server);
    let found = p.find(t, &"mine".parse().unwrap()).await;
    assert!(
        matches!(&found, Ok(f) if matches!(f.place, Place::Delayed { .. })),
        "find: {found:?}"
    );
    restart(&mut server);
    let stats = p.topic_stats(t).await;
    assert!(stats.is_ok(), "topic_stats: {stats:?}");
    restart(&mut server);
    let counts = p.counts(t).await;
    assert_eq!(
        counts.map(|c| c.delayed).ok(),
        Some(5),
        "counts after five sends"
    );
    restart(&mut server);
    let paused = p.is_paused(t).await;
    assert!(matches!(paused, Ok(false)), "is_paused: {paused:?}");
    // Sending the same id again is still a duplicate: the retry did not make a second one.
    let again = p.send_with(t, "a", with_id).await.unwrap();
    assert!(matches!(again, SendOutcome::Duplicate(_)), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_is_not_idempotent_is_not_retried() {
    let mut server = RedisServer::builder()
        .persistence(Persistence::AofAlways)
        .start();
    let t = "retry.cancel";
    let p = warm(&server, t).await;
    restart(&mut server);
    // A cancel run twice answers differently (true, then false): its first call after the
    // restart fails as it always did, and the next one works.
    let first = p.cancel(t, &"warm".parse().unwrap()).await;
    assert!(first.is_err(), "cancel was retried: {first:?}");
    let second = p.cancel(t, &"warm".parse().unwrap()).await.unwrap();
    assert!(matches!(second, Cancelled::Removed), "{second:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_once_across_restarts_arrives_once() {
    let mut server = RedisServer::builder()
        .persistence(Persistence::AofAlways)
        .start();
    let t = "retry.once";
    let p = warm(&server, t).await;
    let other = producer(&server).await;
    other.send(t, "warm-other", Duration::ZERO).await.unwrap();
    restart(&mut server);
    // Two processes' producers send the same id after the restart, each retrying: one
    // creates it, the other finds a duplicate.
    let opts = SendOptions::new()
        .id("shared")
        .delay(Duration::from_millis(300));
    let (a, b) = tokio::join!(
        p.send_with(t, "shared", opts.clone()),
        other.send_with(t, "shared", opts)
    );
    let created = [a.unwrap(), b.unwrap()]
        .iter()
        .filter(|o| matches!(o, SendOutcome::Created(_)))
        .count();
    assert_eq!(created, 1, "one of the two sends created the message");
    restart(&mut server);
    p.send(t, "generated", Duration::from_millis(300))
        .await
        .unwrap();
    let rt = runtime(&server, &[t]).await;
    delayq_dev::drained(&p, t, Duration::from_secs(20)).await;
    // Let any second copy come due and run.
    tokio::time::sleep(Duration::from_millis(800)).await;
    rt.shutdown().await.unwrap();
    let mut seen = ONCE.all();
    seen.sort();
    assert_eq!(seen, ["generated", "shared", "warm", "warm-other"]);
}
