//! A review of 39fe3ac and 0b06fcb (steps returning nothing ack on the plain path; the workflow
//! scripts' fast paths; the start's first steps 1,000 a call). `a_trimmed_value_read_as_option_is_not_kept_not_none`
//! and `a_unit_step_read_as_u32_is_an_error_not_none` fail on 0b06fcb; the others pin what it found sound.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use delayq_core::protocol::{queue, Flow as TopicFlow};
use delayq_core::{Flow, FlowState, Outcome, StepState};
use delayq_dev::{producer, runtime, RedisServer, Seen};
use delayq_runtime::{delay_listener, Dependencies};

const WAIT: Duration = Duration::from_secs(30);

fn zscore(server: &RedisServer, key: &str, member: &str) -> Option<f64> {
    let mut c = server.connection();
    redis::cmd("ZSCORE")
        .arg(key)
        .arg(member)
        .query(&mut c)
        .unwrap()
}

// ---------------------------------------------------------------------------------------
// A: a value-returning step whose kept value is gone (results_max / result_ttl), read as
// Option<T> by its dependent.

static OPT_READ: Seen<(String, String)> = Seen::new();

#[delay_listener(topic = "wcr.optread")]
async fn opt_read(_n: u64, deps: Dependencies) -> Result<(), String> {
    let one = deps.result::<Option<u32>>("a");
    let all = deps.results_of_prefix::<Option<u32>>("a");
    let any = deps.results_of_prefix::<serde_json::Value>("a");
    OPT_READ.push((format!("{one:?}"), format!("{all:?} / as Value: {any:?}")));
    Ok(())
}

/// `Dependencies::result` documents `None` when the value "is no longer kept", and
/// `results_of_prefix` an error; a step that returned `Some(5)` whose value was trimmed must
/// not read as if it had returned `None`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trimmed_value_read_as_option_is_not_kept_not_none() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let id = p
        .start_flow(
            Flow::new()
                .step("a", "wcr.optkeep", &1u64)
                .step("b", "wcr.optread", &2u64)
                .after(["a"]),
        )
        .await
        .unwrap();
    let q = queue(&p, "wcr.optkeep").unwrap().with_flow(TopicFlow {
        results_max: 1,
        ..TopicFlow::default()
    });
    let d = q.claim_due(1, WAIT).await.unwrap().claimed;
    assert_eq!(d.len(), 1);
    let a_id = d[0].id.clone();
    assert_eq!(
        q.ack_keep(&[(d[0].receipt(), b"5".to_vec())])
            .await
            .unwrap(),
        [true]
    );
    // The topic's traffic goes on: one more kept result trims a's (results_max = 1).
    p.send("wcr.optkeep", &9u64, Duration::ZERO).await.unwrap();
    let d = q.claim_due(1, WAIT).await.unwrap().claimed;
    assert_eq!(d.len(), 1);
    q.ack_keep(&[(d[0].receipt(), b"9".to_vec())])
        .await
        .unwrap();
    let got = p.result::<u32>("wcr.optkeep", &a_id).await.unwrap();
    assert!(
        !matches!(got, Outcome::Done(_)),
        "a's value is trimmed: {got:?}"
    );
    q.settle_ended_steps().await.unwrap();
    let rt = runtime(&server, &["wcr.optread"]).await;
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    rt.shutdown().await.unwrap();
    let read = OPT_READ.all();
    assert_eq!(read.len(), 1);
    assert_eq!(
        read[0].0, "Ok(None)",
        "result::<Option<u32>> of a value no longer kept (results_of_prefix: {})",
        read[0].1
    );
    assert!(
        read[0].1.starts_with("Err("),
        "results_of_prefix::<Option<u32>> of a value no longer kept: {}",
        read[0].1
    );
}

// ---------------------------------------------------------------------------------------
// B: a stale step ack in a batch with a fresh one (non-`all` branch): only the acked is noted,
// and the step messages' dedup_for reservations still go in.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_step_ack_beside_a_fresh_one_notes_only_the_fresh() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let id = p
        .start_flow(
            Flow::new()
                .step("s1", "wcr.stale", &1u64)
                .step("s2", "wcr.stale", &2u64),
        )
        .await
        .unwrap();
    let q = queue(&p, "wcr.stale").unwrap();
    let d = q.claim_due(10, WAIT).await.unwrap().claimed;
    assert_eq!(d.len(), 2);
    let (s1, s2) = (d[0].receipt(), d[1].receipt());
    assert!(s1.2 > 0, "steps are sent with a dedup_for window");
    let wrong = (s1.0.clone(), s1.1 + 1, s1.2);
    // s2 given twice, s1 with a wrong token.
    let answers = q.ack(&[wrong, s2.clone(), s2.clone()]).await.unwrap();
    assert_eq!(answers, [false, true, false]);
    let steps = "delayq:{wcr.stale}:steps";
    assert_eq!(
        zscore(&server, steps, s1.0.as_str()),
        None,
        "stale s1 noted"
    );
    assert!(zscore(&server, steps, s2.0.as_str()).is_some_and(|s| s > 0.0));
    assert!(
        zscore(&server, "delayq:{wcr.stale}:done", s2.0.as_str()).is_some(),
        "s2's dedup_for reservation"
    );
    assert_eq!(
        zscore(&server, "delayq:{wcr.stale}:done", s1.0.as_str()),
        None
    );
    // The right ack of s1, riding on a claim.
    let b = q
        .claim_acking(10, WAIT, std::slice::from_ref(&s1))
        .await
        .unwrap();
    let _ = b;
    assert!(zscore(&server, steps, s1.0.as_str()).is_some_and(|s| s > 0.0));
    q.settle_ended_steps().await.unwrap();
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
}

// ---------------------------------------------------------------------------------------
// C: gen > 0 (retry_flow) through the fast paths, and hand-edited states close to them.

async fn failed_then_retried(
    server: &RedisServer,
    topic: &str,
) -> (
    delayq_core::FlowId,
    delayq_core::protocol::TopicQueue,
    delayq_core::Producer,
) {
    let p = producer(server).await;
    let id = p
        .start_flow(
            Flow::new()
                .step("h", topic, &1u64)
                .step("t", topic, &2u64)
                .after(["h"]),
        )
        .await
        .unwrap();
    let q = queue(&p, topic).unwrap();
    let d = q.claim_due(10, WAIT).await.unwrap().claimed;
    assert_eq!(d.len(), 1);
    q.nack(
        &d[0].id,
        d[0].token(),
        Duration::ZERO,
        "boom",
        1,
        Some("boom"),
    )
    .await
    .unwrap();
    q.settle_ended_steps().await.unwrap();
    assert_eq!(
        p.wait_flow(&id, WAIT).await.unwrap(),
        Some(FlowState::Failed)
    );
    assert!(p.retry_flow(&id).await.unwrap().is_some());
    (id, q, p)
}

fn hget(server: &RedisServer, key: &str, field: &str) -> Option<String> {
    let mut c = server.connection();
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(&mut c)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_step_settles_by_the_fast_paths_and_near_patterns_stay_stale() {
    let server = RedisServer::start();
    let (id, q, p) = failed_then_retried(&server, "wcr.gen").await;
    let key = format!("delayq:{{flow:{id}}}:state");
    let st = hget(&server, &key, "h").unwrap();
    assert!(
        st.starts_with("sent 1 "),
        "retried h is sent at gen 1: {st:?}"
    );
    let d = q.claim_due(10, WAIT).await.unwrap().claimed;
    assert_eq!(d.len(), 1);
    assert!(d[0].id.as_str().ends_with("\u{1f}1"));
    // Hand-edit: gen 10 (a pattern built from "1" must not take it).
    let mut c = server.connection();
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("h")
        .arg("sent 10 5 0\n")
        .query(&mut c)
        .unwrap();
    assert_eq!(q.ack(&[d[0].receipt()]).await.unwrap(), [true]);
    q.settle_ended_steps().await.unwrap();
    assert_eq!(
        hget(&server, &key, "h").as_deref(),
        Some("sent 10 5 0\n"),
        "gen 1 ended gen 10"
    );
    // Put back as gen 1 with a reason after it: the slow path settles it done.
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("h")
        .arg("sent 1 5 0\nreason")
        .query(&mut c)
        .unwrap();
    q.settle_step(&d[0].id, &delayq_core::StepEnd::Done)
        .await
        .unwrap();
    let st = hget(&server, &key, "h").unwrap();
    assert!(st.starts_with("done 1 5 "), "{st:?}");
    // t then runs at gen 1 ... no: t was never sent (gen 0 failed before it), it runs now.
    let d = q.claim_due(10, WAIT).await.unwrap().claimed;
    assert_eq!(d.len(), 1, "t sent once h is done");
    assert_eq!(q.ack(&[d[0].receipt()]).await.unwrap(), [true]);
    q.settle_ended_steps().await.unwrap();
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    let info = p.flow(&id).await.unwrap().unwrap();
    assert!(info.steps.iter().all(|s| s.state == StepState::Done));
}

// ---------------------------------------------------------------------------------------
// D: the runtime: a unit step that fails once, retry_flow, its dependent reads it as ().

static FLAKY: AtomicBool = AtomicBool::new(true);
static UNIT_READ: Seen<String> = Seen::new();

#[delay_listener(topic = "wcr.flaky", max_attempts = 1)]
async fn flaky(_n: u64) -> Result<(), String> {
    if FLAKY.swap(false, Ordering::SeqCst) {
        return Err("first run fails".into());
    }
    Ok(())
}

#[delay_listener(topic = "wcr.unitread")]
async fn unit_read(_n: u64, deps: Dependencies) -> Result<(), String> {
    let one: Option<()> = deps.result("f")?;
    let all: Vec<()> = deps.results_of_prefix("f")?;
    UNIT_READ.push(format!("{one:?} {}", all.len()));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_step_retried_by_retry_flow_runs_its_dependent_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["wcr.flaky", "wcr.unitread"]).await;
    let id = p
        .start_flow(
            Flow::new()
                .step("f", "wcr.flaky", &1u64)
                .step("r", "wcr.unitread", &2u64)
                .after(["f"]),
        )
        .await
        .unwrap();
    assert_eq!(
        p.wait_flow(&id, WAIT).await.unwrap(),
        Some(FlowState::Failed)
    );
    assert!(p.retry_flow(&id).await.unwrap().is_some());
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    rt.shutdown().await.unwrap();
    assert_eq!(UNIT_READ.all(), ["Some(()) 1"]);
}

// ---------------------------------------------------------------------------------------
// E: a cancelled flow whose running unit step then acks.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_step_acked_after_cancel_flow_leaves_the_flow_cancelled() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let id = p
        .start_flow(
            Flow::new()
                .step("a", "wcr.cancel", &1u64)
                .step("b", "wcr.cancel", &2u64)
                .after(["a"]),
        )
        .await
        .unwrap();
    let q = queue(&p, "wcr.cancel").unwrap();
    let d = q.claim_due(10, WAIT).await.unwrap().claimed;
    assert_eq!(d.len(), 1);
    assert!(p.cancel_flow(&id).await.unwrap());
    let _ = q.ack(&[d[0].receipt()]).await.unwrap();
    q.settle_ended_steps().await.unwrap();
    let info = p.flow(&id).await.unwrap().unwrap();
    assert_eq!(info.state, FlowState::Cancelled);
    assert!(
        q.claim_due(10, WAIT).await.unwrap().claimed.is_empty(),
        "b never sent"
    );
}

// ---------------------------------------------------------------------------------------
// F: a fan-in of 9,999 unit steps (the most a flow may have, with its dependent): the start
// sends them 1,000 a call, they ack on the plain path, and the dependent reads them all.

static WIDE_READ: Seen<usize> = Seen::new();

#[delay_listener(topic = "wcr.wide")]
async fn wide(_n: u64) {}

#[delay_listener(topic = "wcr.wideread")]
async fn wide_read(_n: u64, deps: Dependencies) -> Result<(), String> {
    let all: Vec<()> = deps.results_of_prefix("w")?;
    WIDE_READ.push(all.len());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_in_of_9999_unit_steps_is_read_whole() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let n = delayq_core::MAX_FLOW_STEPS - 1;
    let names: Vec<String> = (0..n).map(|i| format!("w{i}")).collect();
    let mut flow = Flow::new();
    for (i, s) in names.iter().enumerate() {
        flow = flow.step(s, "wcr.wide", &(i as u64));
    }
    let flow = flow.step("last", "wcr.wideread", &0u64).after(&names);
    let t = std::time::Instant::now();
    let id = p.start_flow(flow).await.unwrap();
    println!("start_flow: {:?}", t.elapsed());
    let rt = runtime(&server, &["wcr.wide", "wcr.wideread"]).await;
    let state = p.wait_flow(&id, Duration::from_secs(240)).await.unwrap();
    println!("flow ended {state:?} after {:?}", t.elapsed());
    rt.shutdown().await.unwrap();
    assert_eq!(state, Some(FlowState::Done));
    assert_eq!(WIDE_READ.all(), [n]);
}

// ---------------------------------------------------------------------------------------
// G: a waiter on a unit step's message, registered while it runs, hears its end.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_on_a_unit_step_message_hears_the_plain_ack() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let _id = p
        .start_flow(Flow::new().step("a", "wcr.wait", &1u64))
        .await
        .unwrap();
    let q = queue(&p, "wcr.wait").unwrap();
    let d = q.claim_due(10, WAIT).await.unwrap().claimed;
    assert_eq!(d.len(), 1);
    let (p2, mid) = (p.clone(), d[0].id.clone());
    let waiter = tokio::spawn(async move {
        p2.wait::<serde_json::Value>("wcr.wait", &mid, Duration::from_secs(10))
            .await
            .unwrap()
    });
    delayq_dev::sleep_ms(500).await;
    assert_eq!(q.ack(&[d[0].receipt()]).await.unwrap(), [true]);
    let t = std::time::Instant::now();
    let got = waiter.await.unwrap();
    assert!(
        matches!(got, Outcome::Done(_)),
        "{got:?} after {:?}",
        t.elapsed()
    );
    assert!(t.elapsed() < Duration::from_secs(5));
}

// ---------------------------------------------------------------------------------------
// H: an older runtime's ack of a unit step (ack_keep with `null`), then the sweep: the flow
// ends, and the dependent reads ().

static OLD_READ: Seen<String> = Seen::new();

#[delay_listener(topic = "wcr.oldread")]
async fn old_read(_n: u64, deps: Dependencies) -> Result<(), String> {
    let one: Option<()> = deps.result("a")?;
    let all: Vec<()> = deps.results_of_prefix("a")?;
    OLD_READ.push(format!("{one:?} {}", all.len()));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_runtimes_keeping_ack_of_a_unit_step_is_read_as_unit() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let id = p
        .start_flow(
            Flow::new()
                .step("a", "wcr.old", &1u64)
                .step("b", "wcr.oldread", &2u64)
                .after(["a"]),
        )
        .await
        .unwrap();
    let q = queue(&p, "wcr.old").unwrap();
    let d = q.claim_due(10, WAIT).await.unwrap().claimed;
    assert_eq!(
        q.ack_keep(&[(d[0].receipt(), b"null".to_vec())])
            .await
            .unwrap(),
        [true]
    );
    q.settle_ended_steps().await.unwrap();
    let rt = runtime(&server, &["wcr.oldread"]).await;
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    rt.shutdown().await.unwrap();
    assert_eq!(OLD_READ.all(), ["Some(()) 1"]);
}

// ---------------------------------------------------------------------------------------
// I: a manual-ack step (`Ack` parameter) acked by hand; and one dropped without an ack is
// delivered again, then acked: its dependent runs once.

static MANUAL_RUNS: Seen<u64> = Seen::new();
static MANUAL_AFTER: Seen<u64> = Seen::new();

#[delay_listener(topic = "wcr.manual", ack_timeout = "1s")]
async fn manual(n: delayq_runtime::Message<u64>, ack: delayq_runtime::Ack) {
    MANUAL_RUNS.push(n.attempt() as u64);
    if n.id().as_str().contains("m2") && n.attempt() == 1 {
        return; // dropped: delivered again after the deadline
    }
    ack.ack().await.unwrap();
}

#[delay_listener(topic = "wcr.manualafter")]
async fn manual_after(n: u64) {
    MANUAL_AFTER.push(n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_ack_steps_end_and_their_dependent_runs_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["wcr.manual", "wcr.manualafter"]).await;
    let id = p
        .start_flow(
            Flow::new()
                .step("m1", "wcr.manual", &1u64)
                .step("m2", "wcr.manual", &2u64)
                .step("z", "wcr.manualafter", &9u64)
                .after(["m1", "m2"]),
        )
        .await
        .unwrap();
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    delayq_dev::sleep_ms(1500).await;
    rt.shutdown().await.unwrap();
    assert_eq!(MANUAL_AFTER.all(), [9]);
    assert!(
        MANUAL_RUNS.all().contains(&2),
        "m2 was delivered again: {:?}",
        MANUAL_RUNS.all()
    );
}

// ---------------------------------------------------------------------------------------
// J: a unit step read as a type it never returned (u32): `result` documents an error "when
// its value is not a T" (before 39fe3ac: "does not decode into u32").

static MISMATCH: Seen<String> = Seen::new();

#[delay_listener(topic = "wcr.unit2")]
async fn unit2(_n: u64) {}

#[delay_listener(topic = "wcr.mismatch")]
async fn mismatch(_n: u64, deps: Dependencies) -> Result<(), String> {
    MISMATCH.push(format!("{:?}", deps.result::<u32>("u")));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_step_read_as_u32_is_an_error_not_none() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["wcr.unit2", "wcr.mismatch"]).await;
    let id = p
        .start_flow(
            Flow::new()
                .step("u", "wcr.unit2", &1u64)
                .step("m", "wcr.mismatch", &2u64)
                .after(["u"]),
        )
        .await
        .unwrap();
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    rt.shutdown().await.unwrap();
    let read = MISMATCH.all();
    assert!(
        read[0].starts_with("Err("),
        "result::<u32> of a unit step: {}",
        read[0]
    );
}
