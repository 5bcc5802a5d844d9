//! Workflows under a running runtime: steps run after what they wait for, across topics; the
//! failure policy of each edge (a failed step never strands the flow); whole-flow retry and
//! cancel; a fan-in; and the ends a crash leaves unsettled, settled by the back pool.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use delayq_core::protocol::queue;
use delayq_core::{Flow, FlowState, OnFailure, Outcome, StepState};
use delayq_dev::{producer, runtime, sleep_ms, RedisServer, Seen};
use delayq_runtime::{delay_listener, Message};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    name: String,
    #[serde(default)]
    fail: bool,
    #[serde(default)]
    sleep_ms: u64,
}

fn job(name: &str) -> Job {
    Job {
        name: name.into(),
        fail: false,
        sleep_ms: 0,
    }
}

static RUNS: Seen<String> = Seen::new();
/// While set, steps named "flaky" fail.
static FLAKY: AtomicBool = AtomicBool::new(true);

#[delay_listener(topic = "wf.a", max_attempts = 1)]
async fn step_a(msg: Message<Job>) -> Result<String, String> {
    run(msg.into_payload()).await
}

#[delay_listener(topic = "wf.b", max_attempts = 1)]
async fn step_b(job: Job) -> Result<String, String> {
    run(job).await
}

async fn run(job: Job) -> Result<String, String> {
    sleep_ms(job.sleep_ms).await;
    RUNS.push(job.name.clone());
    if job.fail || (job.name.starts_with("flaky") && FLAKY.load(Ordering::SeqCst)) {
        return Err(format!("{} broke", job.name));
    }
    Ok(format!("{} ok", job.name))
}

fn runs_of(prefix: &str) -> Vec<String> {
    RUNS.all()
        .into_iter()
        .filter(|r| r.starts_with(prefix))
        .collect()
}

const TOPICS: &[&str] = &["wf.a", "wf.b"];
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diamond_across_topics_runs_in_order_and_keeps_each_result() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, TOPICS).await;
    let flow = Flow::new()
        .step("dia-a", "wf.a", &job("dia-a"))
        .step("dia-b", "wf.b", &job("dia-b"))
        .after(["dia-a"])
        .step("dia-c", "wf.a", &job("dia-c"))
        .after(["dia-a"])
        .step("dia-d", "wf.b", &job("dia-d"))
        .after(["dia-b", "dia-c"]);
    let id = p.start_flow(flow).await.unwrap();
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    let runs = runs_of("dia-");
    assert_eq!(runs.len(), 4, "{runs:?}");
    assert_eq!(runs[0], "dia-a");
    assert_eq!(runs[3], "dia-d");
    let info = p.flow(&id).await.unwrap().unwrap();
    assert_eq!(info.state, FlowState::Done);
    for s in &info.steps {
        assert_eq!(s.state, StepState::Done, "{s:?}");
    }
    // Each step's value is kept in its topic under its message id.
    let d = info.steps.iter().find(|s| s.name == "dia-d").unwrap();
    let kept: Outcome<String> = p.result(&d.topic, &d.message_id).await.unwrap();
    assert_eq!(kept, Outcome::Done("dia-d ok".into()));
    // Nothing left to settle.
    let mut c = server.connection();
    for t in TOPICS {
        let left: u64 = redis::cmd("ZCARD")
            .arg(format!("delayq:{{{t}}}:steps"))
            .query(&mut c)
            .unwrap();
        assert_eq!(left, 0, "{t}");
    }
    rt.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_fails_the_flow_at_once_and_ignore_lets_a_step_run() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, TOPICS).await;
    let mut broken = job("pol-broken");
    broken.fail = true;
    let mut slow = job("pol-slow");
    slow.sleep_ms = 3_000;
    let flow = Flow::new()
        .step("pol-broken", "wf.a", &broken)
        .step("pol-slow", "wf.b", &slow)
        .step("pol-needs", "wf.b", &job("pol-needs"))
        .after(["pol-broken"])
        .step("pol-tolerant", "wf.a", &job("pol-tolerant"))
        .after(["pol-broken"])
        .if_failed("pol-broken", OnFailure::Ignore);
    let id = p.start_flow(flow).await.unwrap();
    let started = Instant::now();
    assert_eq!(
        p.wait_flow(&id, WAIT).await.unwrap(),
        Some(FlowState::Failed)
    );
    // At once: the slow step still runs.
    assert!(
        started.elapsed() < Duration::from_millis(2_500),
        "{:?}",
        started.elapsed()
    );
    let info = p.flow(&id).await.unwrap().unwrap();
    assert!(
        info.reason.as_deref().unwrap().contains("pol-broken"),
        "{:?}",
        info.reason
    );
    let state = |n: &str| info.steps.iter().find(|s| s.name == n).unwrap().clone();
    assert_eq!(state("pol-needs").state, StepState::Failed);
    assert!(state("pol-needs")
        .reason
        .unwrap()
        .contains("after pol-broken failed"));
    // The tolerant one ran (it may still be running: wait for it).
    let deadline = Instant::now() + WAIT;
    while runs_of("pol-tolerant").is_empty() {
        assert!(Instant::now() < deadline);
        sleep_ms(20).await;
    }
    sleep_ms(3_500).await;
    assert!(
        runs_of("pol-needs").is_empty(),
        "a step behind a Fail edge ran"
    );
    assert_eq!(runs_of("pol-tolerant").len(), 1);
    let info = p.flow(&id).await.unwrap().unwrap();
    assert_eq!(info.state, FlowState::Failed, "a failed flow stays failed");
    rt.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_runs_the_failed_and_downstream_again_and_keeps_what_succeeded() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, TOPICS).await;
    FLAKY.store(true, Ordering::SeqCst);
    let flow = Flow::new()
        .step("rt-first", "wf.a", &job("rt-first"))
        .step("flaky-mid", "wf.b", &job("flaky-mid"))
        .after(["rt-first"])
        .step("rt-last", "wf.a", &job("rt-last"))
        .after(["flaky-mid"]);
    let id = p.start_flow(flow).await.unwrap();
    assert_eq!(
        p.wait_flow(&id, WAIT).await.unwrap(),
        Some(FlowState::Failed)
    );
    let info = p.flow(&id).await.unwrap().unwrap();
    let last = info.steps.iter().find(|s| s.name == "rt-last").unwrap();
    assert_eq!(last.state, StepState::Failed, "{last:?}");
    FLAKY.store(false, Ordering::SeqCst);
    // The failed step and the one downstream of it run again.
    assert_eq!(p.retry_flow(&id).await.unwrap(), Some(2));
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    assert_eq!(runs_of("flaky-mid").len(), 2);
    assert_eq!(
        runs_of("rt-first").len(),
        1,
        "a step that succeeded ran again"
    );
    assert_eq!(runs_of("rt-last").len(), 1);
    let info = p.flow(&id).await.unwrap().unwrap();
    let mid = info.steps.iter().find(|s| s.name == "flaky-mid").unwrap();
    assert!(mid.gen >= 1);
    assert_eq!(
        p.retry_flow(&id).await.unwrap(),
        Some(0),
        "nothing left to retry"
    );
    rt.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_flow_and_its_pending_steps() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, TOPICS).await;
    let flow = Flow::new()
        .step("cx-later", "wf.a", &job("cx-later"))
        .delay(Duration::from_secs(3600))
        .step("cx-after", "wf.b", &job("cx-after"))
        .after(["cx-later"]);
    let id = p.start_flow(flow).await.unwrap();
    assert_eq!(p.counts("wf.a").await.unwrap().delayed, 1);
    assert!(p.cancel_flow(&id).await.unwrap());
    assert!(
        !p.cancel_flow(&id).await.unwrap(),
        "a second cancel changes nothing"
    );
    assert_eq!(p.counts("wf.a").await.unwrap().delayed, 0);
    assert_eq!(
        p.wait_flow(&id, WAIT).await.unwrap(),
        Some(FlowState::Cancelled)
    );
    let info = p.flow(&id).await.unwrap().unwrap();
    assert!(info.steps.iter().all(|s| s.state == StepState::Cancelled));
    // A cancelled flow can be run again.
    assert_eq!(p.retry_flow(&id).await.unwrap(), Some(2));
    assert_eq!(p.counts("wf.a").await.unwrap().delayed, 1);
    rt.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_in_of_a_thousand_runs_its_last_step_once() {
    const N: usize = 1_000;
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, TOPICS).await;
    let names: Vec<String> = (0..N).map(|i| format!("fan-{i}")).collect();
    let mut flow = Flow::new();
    for n in &names {
        flow = flow.step(n, "wf.a", &job(n));
    }
    let flow = flow
        .step("fanin-last", "wf.b", &job("fanin-last"))
        .after(&names);
    let started = Instant::now();
    let id = p.start_flow(flow).await.unwrap();
    assert_eq!(
        p.wait_flow(&id, Duration::from_secs(120)).await.unwrap(),
        Some(FlowState::Done)
    );
    println!("a fan-in of {N} steps: {:?}", started.elapsed());
    assert_eq!(runs_of("fanin-last").len(), 1);
    assert_eq!(runs_of("fan-").len(), N);
    rt.shutdown().await.unwrap();
}

/// A process that died between a step's ack and its settle (the end noted in its topic, the
/// flow not told): the back pool's sweep of the next runtime settles it, and the dependent
/// runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_left_unsettled_by_a_crash_is_settled_by_the_next_runtime() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let flow = Flow::new()
        .step("crash-first", "wf.a", &job("crash-first"))
        .step("crash-then", "wf.b", &job("crash-then"))
        .after(["crash-first"]);
    let id = p.start_flow(flow).await.unwrap();
    // The first step's message, claimed and acked by hand (what a runtime does before it
    // settles), as if that runtime was killed right after.
    let q = queue(&p, "wf.a").unwrap();
    let d = q
        .claim_due(1, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(d.len(), 1);
    assert_eq!(
        q.ack_keep(&[(d[0].receipt(), b"\"by hand\"".to_vec())])
            .await
            .unwrap(),
        [true]
    );
    sleep_ms(300).await;
    let info = p.flow(&id).await.unwrap().unwrap();
    assert_eq!(info.state, FlowState::Running);
    let first = info.steps.iter().find(|s| s.name == "crash-first").unwrap();
    assert_eq!(first.state, StepState::Sent, "the flow was not told");
    let rt = runtime(&server, TOPICS).await;
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    assert_eq!(runs_of("crash-then").len(), 1);
    assert!(
        runs_of("crash-first").is_empty(),
        "the acked step ran again"
    );
    rt.shutdown().await.unwrap();
}

/// Bad flows are refused before anything is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_flow_writes_nothing() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let err = p
        .start_flow(
            Flow::new()
                .step("x", "wf.a", &1)
                .after(["y"])
                .step("y", "wf.a", &1)
                .after(["x"]),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("cycle: x -> y -> x")
            || err.to_string().contains("cycle: y -> x -> y"),
        "{err}"
    );
    let mut c = server.connection();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}
