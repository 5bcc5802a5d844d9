// Item 7, second half: `dedup_for(d)` keeps a finished message's id reserved for `d`. A send
// with the id in that window is `Duplicate` whatever it asks (replace, debounce); a message
// that died counts as finished; a cancel leaves no reservation; the reservation ends after
// the window (a resend is `Created` and runs) and costs no memory after it; a far message
// keeps its window through its far bucket; the test kit's `advance` moves the window's end.

use std::time::Duration;

use delayq_core::protocol::TopicKeys;
use delayq_core::{MessageId, SendOptions, SendOutcome};
use delayq_dev::{producer, sleep_ms, RedisServer, Seen};
use delayq_runtime::delay_listener;
use delayq_runtime::testing::TestRuntime;
use delayq_runtime::Runtime;

static RAN: Seen<u32> = Seen::new();

/// Payloads of 100 and more fail; with max_attempts 1 they go to the dead letters at once.
#[delay_listener(topic = "flow.dedup", max_attempts = 1)]
async fn dedup_handler(n: u32) -> Result<(), String> {
    RAN.push(n);
    if n >= 100 {
        return Err(format!("{n} fails"));
    }
    Ok(())
}

fn reserved(server: &RedisServer, topic: &str) -> Vec<(String, f64)> {
    let keys = TopicKeys::new("delayq", topic).unwrap();
    redis::cmd("ZRANGE")
        .arg(&keys.done)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut server.connection())
        .unwrap()
}

fn is_dup(o: &SendOutcome) -> bool {
    matches!(o, SendOutcome::Duplicate(_))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_id_stays_reserved_for_its_window_whatever_the_send_asks_then_is_free() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["flow.dedup"])
        .spawn()
        .await
        .unwrap();
    let t = "flow.dedup";
    let window = Duration::from_millis(1500);
    let with = |id: &str| SendOptions::new().id(id).dedup_for(window);

    // Acked: the id is reserved; a plain send, a replace and a debounce are all duplicates.
    let first = p.send_with(t, &1u32, with("inv-1")).await.unwrap();
    assert!(matches!(first, SendOutcome::Created(_)), "{first:?}");
    RAN.wait_for(1, Duration::from_secs(5)).await;
    sleep_ms(100).await; // the ack
    for opts in [
        SendOptions::new().id("inv-1"),
        SendOptions::new().id("inv-1").replace(true),
        SendOptions::new()
            .id("inv-1")
            .debounce(Duration::from_millis(10)),
        with("inv-1"),
    ] {
        let again = p.send_with(t, &2u32, opts.clone()).await.unwrap();
        assert!(is_dup(&again), "{opts:?} in the window: {again:?}");
    }
    let held = reserved(&server, t);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].0, "inv-1");

    // Dead: finished too. Without dedup_for a dead id starts afresh on a resend.
    p.send_with(t, &100u32, with("inv-dead")).await.unwrap();
    p.send_with(t, &101u32, SendOptions::new().id("plain-dead"))
        .await
        .unwrap();
    RAN.wait_for(3, Duration::from_secs(5)).await;
    sleep_ms(100).await;
    let again = p.send_with(t, &102u32, with("inv-dead")).await.unwrap();
    assert!(is_dup(&again), "a dead id in its window: {again:?}");
    let plain = p
        .send_with(t, &103u32, SendOptions::new().id("plain-dead"))
        .await
        .unwrap();
    assert!(
        matches!(plain, SendOutcome::Created(_)),
        "without dedup_for a dead id starts afresh: {plain:?}"
    );

    // A cancelled message leaves no reservation.
    let pending = SendOptions::new()
        .id("inv-cancel")
        .dedup_for(window)
        .delay(Duration::from_secs(60));
    p.send_with(t, &3u32, pending).await.unwrap();
    p.cancel(t, &MessageId::new("inv-cancel").unwrap())
        .await
        .unwrap();
    let after_cancel = p.send_with(t, &4u32, with("inv-cancel")).await.unwrap();
    assert!(
        matches!(after_cancel, SendOutcome::Created(_)),
        "{after_cancel:?}"
    );

    // After the window the id is free: the resend is created and runs.
    sleep_ms(1600).await;
    let later = p.send_with(t, &5u32, with("inv-1")).await.unwrap();
    assert!(
        matches!(later, SendOutcome::Created(_)),
        "after the window: {later:?}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !RAN.all().contains(&5) && std::time::Instant::now() < deadline {
        sleep_ms(20).await;
    }
    assert!(RAN.all().contains(&5), "{:?}", RAN.all());
    assert!(!RAN.all().contains(&2), "a duplicate ran: {:?}", RAN.all());
    sleep_ms(100).await;
    // Expired reservations went when the new one was written: only inv-1's second is left,
    // none of the first round's (inv-1, inv-dead, inv-cancel).
    let left: Vec<String> = reserved(&server, t).into_iter().map(|(id, _)| id).collect();
    assert_eq!(left, ["inv-1"], "expired reservations kept");

    // Without an id the option is refused, and nothing is sent.
    let err = p
        .send_with(t, &6u32, SendOptions::new().dedup_for(window))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("needs an id"), "{err}");
    rt.shutdown().await.unwrap();
}

static KIT_RAN: Seen<u32> = Seen::new();

#[delay_listener(topic = "flow.dedup.kit")]
async fn dedup_kit(n: u32) {
    KIT_RAN.push(n);
}

/// A message due in ten minutes waits in a far bucket, as its compact far record unless it
/// keeps its window; the test kit's advance lets the window pass like every other wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_far_message_keeps_its_window_and_the_kit_advance_ends_it() {
    let t = TestRuntime::builder()
        .topics(["flow.dedup.kit"])
        .start()
        .await
        .unwrap();
    let topic = "flow.dedup.kit";
    let opts = || {
        SendOptions::new()
            .id("far-1")
            .dedup_for(Duration::from_secs(3600))
    };
    t.producer()
        .send_with(topic, &1u32, opts().delay(Duration::from_secs(600)))
        .await
        .unwrap();
    t.advance(Duration::from_secs(601)).await.unwrap();
    KIT_RAN.wait_for(1, Duration::from_secs(5)).await;
    t.run_until_idle_within(Duration::from_secs(5))
        .await
        .unwrap();
    let again = t.producer().send_with(topic, &2u32, opts()).await.unwrap();
    assert!(is_dup(&again), "in the window after a far wait: {again:?}");
    t.advance(Duration::from_secs(3601)).await.unwrap();
    let after = t.producer().send_with(topic, &3u32, opts()).await.unwrap();
    assert!(
        matches!(after, SendOutcome::Created(_)),
        "after advance past the window: {after:?}"
    );
    KIT_RAN.wait_for(2, Duration::from_secs(5)).await;
    assert_eq!(KIT_RAN.all(), [1, 3]);
    t.shutdown().await.unwrap();
}
