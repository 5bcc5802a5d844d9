// Review of 3bb184d (priorities), each failing on that commit. API.md, "Flow control": "among
// due messages higher priority is claimed first, FIFO by due time within a level, never
// early" -- also behind a backlog of more than one call's move, and after the test kit's
// `advance(d)` (which "lets d pass for everything waiting", a rate limit's time included, and
// by a century). The kit's `state` helper sees a message waiting in `ready`.

use std::time::Duration;

use delayq_core::{MessageId, Priority, SendOptions};
use delayq_dev::{producer, sleep_ms, RedisServer, Seen};
use delayq_runtime::testing::TestRuntime;
use delayq_runtime::delay_listener;

// --- 1. A backlog of more than 1,000 due messages hides a later-due high one --------------

static BACKLOG: Seen<String> = Seen::new();

#[delay_listener(topic = "review.prio.backlog", concurrency = 1)]
async fn backlog_handler(tag: String) {
    BACKLOG.push(tag);
}

/// 3,000 normal messages due, then one high one (due a few ms later, still due when claims
/// start). Claims of one (concurrency 1) move 1,000 a call by due time, so the high one only
/// reaches `ready` at the fourth claim: three normal ones run first, more than "one call's
/// worth", and not "higher priority claimed first".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_message_due_behind_a_backlog_of_3000_runs_first() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "review.prio.backlog";
    p.pause(t).await.unwrap();
    p.send_batch(
        t,
        (0..3000u32).map(|n| (format!("normal-{n}"), Duration::ZERO)),
    )
    .await
    .unwrap();
    sleep_ms(5).await;
    p.send_with(
        t,
        &"high".to_string(),
        SendOptions::new().priority(Priority::High),
    )
    .await
    .unwrap();
    sleep_ms(5).await;
    let rt = crate::runtime(&server, t).await;
    p.resume(t).await.unwrap();
    BACKLOG
        .wait_matching(1, Duration::from_secs(20), |s| s == "high")
        .await;
    let runs = BACKLOG.all();
    rt.shutdown().await.unwrap();
    let at = runs.iter().position(|s| s == "high").unwrap();
    assert_eq!(
        at,
        0,
        "the high message, due with 3,000 normal ones, ran after {at} of them: {:?}",
        &runs[..at + 1]
    );
}

// --- 2. The test kit's advance on a rate-limited topic with priorities ---------------------

static KIT_RATE: Seen<String> = Seen::new();

#[delay_listener(topic = "review.prio.kit.rate", rate = "1/m", concurrency = 1)]
async fn kit_rate_handler(tag: String) {
    KIT_RATE.push(tag);
}

/// As flow/kit_rate.rs (fixed for plain topics), on a topic with priorities: the first claim
/// moves the three due messages to `ready` and takes one; travel.lua shifts only `delayed`, so
/// it counts nothing made due, gives the limit no credit and wakes no boss: an advance of an
/// hour does not let the other two run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_advance_of_an_hour_lets_a_1_per_minute_prioritized_topic_run_its_three() {
    let t = "review.prio.kit.rate";
    let kit = TestRuntime::builder().topics([t]).start().await.unwrap();
    let p = kit.producer();
    p.pause(t).await.unwrap();
    for n in 0..3 {
        let opts = SendOptions::new().priority(Priority::High);
        p.send_with(t, &format!("m{n}"), opts).await.unwrap();
    }
    p.resume(t).await.unwrap();
    KIT_RATE.wait_for(1, Duration::from_secs(5)).await;
    kit.advance(Duration::from_secs(3600)).await.unwrap();
    let idle = kit.run_until_idle_within(Duration::from_secs(5)).await;
    let ran = KIT_RATE.all();
    kit.shutdown().await.unwrap();
    assert!(
        idle.is_ok() && ran.len() == 3,
        "after advance(1h): run_until_idle {idle:?}; ran {ran:?}"
    );
}

// --- 3. The test kit's advance: FIFO within a level between `ready` and `delayed` ----------

static KIT_FIFO: Seen<String> = Seen::new();

#[delay_listener(topic = "review.prio.kit.fifo", rate = "1/m", concurrency = 1)]
async fn kit_fifo_handler(tag: String) {
    KIT_FIFO.push(tag);
}

/// "a" (normal) is due now and waits in `ready` behind the rate limit; "b" (normal) is due
/// ten minutes later. advance(1h) moves b's due time an hour earlier in `delayed` but leaves
/// a's score in `ready` where it was, so b is put ahead of a: FIFO by due time within a level
/// is lost (a plain topic keeps it: both wait in `delayed` and move together).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_advance_an_earlier_due_message_in_ready_still_runs_first_within_its_level() {
    let t = "review.prio.kit.fifo";
    let kit = TestRuntime::builder().topics([t]).start().await.unwrap();
    let p = kit.producer();
    p.pause(t).await.unwrap();
    let high = SendOptions::new().id("first").priority(Priority::High);
    p.send_with(t, &"first".to_string(), high).await.unwrap();
    let a = SendOptions::new().id("a");
    p.send_with(t, &"a".to_string(), a).await.unwrap();
    p.resume(t).await.unwrap();
    KIT_FIFO.wait_for(1, Duration::from_secs(5)).await;
    let b = SendOptions::new().id("b").delay(Duration::from_secs(600));
    p.send_with(t, &"b".to_string(), b).await.unwrap();
    kit.advance(Duration::from_secs(3600)).await.unwrap();
    kit.run_until_idle_within(Duration::from_secs(10))
        .await
        .unwrap();
    let ran = KIT_FIFO.all();
    kit.shutdown().await.unwrap();
    assert_eq!(ran, ["first", "a", "b"], "run order");
}

// --- 4. The test kit's advance past ~56 years: due scores below 0 all tie in `ready` --------

static KIT_FAR: Seen<String> = Seen::new();

#[delay_listener(topic = "review.prio.kit.years", concurrency = 1)]
async fn kit_years_handler(tag: String) {
    KIT_FAR.push(tag);
}

/// The kit advances to the year 9000 (testing_kit.rs); an advance of a century makes the
/// shifted due times of messages due now negative. ready_score clamps them to 0, so within a
/// level they tie and go by id ("a2" before "z1"), not by due time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_advance_of_a_century_a_level_still_runs_in_due_order() {
    let t = "review.prio.kit.years";
    let kit = TestRuntime::builder().topics([t]).start().await.unwrap();
    let p = kit.producer();
    for (id, delay_ms, level) in [
        ("z1", 1_000, Priority::Normal),
        ("a2", 2_000, Priority::Normal),
        ("m0", 3_000, Priority::High),
    ] {
        let opts = SendOptions::new()
            .id(id)
            .priority(level)
            .delay(Duration::from_millis(delay_ms));
        p.send_with(t, &id.to_string(), opts).await.unwrap();
    }
    kit.advance(Duration::from_secs(100 * 365 * 86_400))
        .await
        .unwrap();
    kit.run_until_idle_within(Duration::from_secs(10))
        .await
        .unwrap();
    let ran = KIT_FAR.all();
    kit.shutdown().await.unwrap();
    assert_eq!(ran, ["m0", "z1", "a2"], "run order");
}

// --- 5. The test kit's `state` helper ------------------------------------------------------

/// delayq_dev::state ("delayed", "inflight", "dead" or "gone") reads `delayed`, `inflight`
/// and `dead` only: a message waiting in `ready` makes it panic ("in [] with envelope").
#[tokio::test]
async fn the_kit_state_helper_calls_a_message_in_ready_delayed() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "review.prio.state";
    for (id, level) in [("h", Priority::High), ("l", Priority::Low)] {
        let opts = SendOptions::new().id(id).priority(level);
        p.send_with(t, &id.to_string(), opts).await.unwrap();
    }
    let q = delayq_core::protocol::queue(&p, t).unwrap();
    let got = q
        .claim_due(1, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(got[0].id.as_str(), "h");
    let l = MessageId::new("l").unwrap();
    assert_eq!(p.counts(t).await.unwrap().delayed, 1);
    assert_eq!(delayq_dev::state(&server, t, &l), "delayed");
}
