//! `add_flow_step` refuses what it must (a review's findings, each test failing on 62dca72):
//! a step that is not running, a message of an older run, and a name another step of the flow
//! has. No listener: steps sent to a topic nobody listens on stay sent.

use delayq_core::{Flow, FlowId, StepState};
use delayq_dev::{producer, RedisServer};

async fn step(p: &delayq_core::Producer, id: &FlowId, name: &str) -> delayq_core::StepInfo {
    p.flow(id)
        .await
        .unwrap()
        .unwrap()
        .steps
        .into_iter()
        .find(|s| s.name == name)
        .unwrap()
}

/// A step that has not run (waiting for its dependency) adds a step: the new one is sent at
/// once, before its adder ran, and the adder's dependents wait for it. Refused, nothing
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r3_a_waiting_step_cannot_add_steps() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let flow = Flow::new()
        .step("a", "r3.idle", &1)
        .step("b", "r3.idle", &2)
        .after(["a"])
        .step("c", "r3.idle", &3)
        .after(["b"]);
    let id = p.start_flow(flow).await.unwrap();
    let b = step(&p, &id, "b").await;
    assert_eq!(b.state, StepState::Waiting);
    let got = p.add_flow_step(&b.message_id, "x", "r3.idle", &9).await;
    assert!(
        got.is_err(),
        "a waiting step added {got:?} while it never ran"
    );
    let steps = p.flow(&id).await.unwrap().unwrap().steps;
    assert!(
        steps.iter().all(|s| s.name != "x"),
        "x was written: {steps:?}"
    );
}

/// The message of an older gen (its flow was cancelled and retried while it ran) adds a
/// step to the flow's new run. Expected: refused (as settle refuses an older gen's end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r3_an_older_gens_message_cannot_add_steps() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let flow = Flow::new()
        .step("a", "r3.idle", &1)
        .step("d", "r3.idle", &2)
        .after(["a"]);
    let id = p.start_flow(flow).await.unwrap();
    let a0 = step(&p, &id, "a").await;
    assert_eq!(a0.state, StepState::Sent);
    assert!(p.cancel_flow(&id).await.unwrap());
    assert_eq!(p.retry_flow(&id).await.unwrap(), Some(2));
    let a1 = step(&p, &id, "a").await;
    assert_eq!(a1.gen, 1);
    let got = p.add_flow_step(&a0.message_id, "x", "r3.idle", &9).await;
    assert!(got.is_err(), "gen 0's message added {got:?} to gen 1's run");
}

/// A name that is an existing step of the flow (the adder itself, or its dependent) is not a
/// step this adder added before: `Ok(false)` ("added before") hides a bad name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r3_adding_an_existing_original_step_name_is_an_error() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let flow = Flow::new()
        .step("a", "r3.idle", &1)
        .step("d", "r3.idle", &2)
        .after(["a"]);
    let id = p.start_flow(flow).await.unwrap();
    let a = step(&p, &id, "a").await;
    let itself = p.add_flow_step(&a.message_id, "a", "r3.idle", &9).await;
    let dependent = p.add_flow_step(&a.message_id, "d", "r3.other", &9).await;
    assert!(
        itself.is_err() && dependent.is_err(),
        "adding the adder's own name: {itself:?}; its dependent's name (another topic): {dependent:?}"
    );
}
