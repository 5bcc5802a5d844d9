//! Flow steps whose handlers return nothing: their acks ride on claims as plain acks do, keep
//! no value, and still note the end for the flow in the ack's own call (so that a process
//! killed between the ack and the settle loses no step: the back pool's sweep settles it).
//! Their dependents read them as done, and `()` reads from them. And a step added at run time
//! to a flow whose dependents have the same record text is added to each once.

use std::time::Duration;

use delayq_core::protocol::queue;
use delayq_core::{Flow, FlowState, Outcome, StepState};
use delayq_dev::{producer, runtime, RedisServer, Seen};
use delayq_runtime::{delay_listener, Dependencies};

const WAIT: Duration = Duration::from_secs(30);

/// A plain ack of a flow step's message (`ack.lua`, not `ack_keep.lua`) notes its end for the
/// flow, and keeps no value: the sweep, which reads only the notes, settles it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_ack_of_a_step_notes_its_end_and_the_sweep_settles_it() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let flow = Flow::new()
        .step("a", "wu.plain", &1u64)
        .step("b", "wu.plain", &2u64)
        .after(["a"]);
    let id = p.start_flow(flow).await.unwrap();
    let q = queue(&p, "wu.plain").unwrap();
    let d = q
        .claim_due(10, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(d.len(), 1, "a is due, b waits");
    // Acked as a handler returning nothing is, and never settled by this process (as one
    // killed right after its ack).
    assert_eq!(q.ack(&[d[0].receipt()]).await.unwrap(), [true]);
    let mut c = server.connection();
    let noted: Option<f64> = redis::cmd("ZSCORE")
        .arg("delayq:{wu.plain}:steps")
        .arg(d[0].id.as_str())
        .query(&mut c)
        .unwrap();
    assert!(
        noted.is_some_and(|s| s > 0.0),
        "the ack noted a's end: {noted:?}"
    );
    assert_eq!(
        p.result::<serde_json::Value>("wu.plain", &d[0].id)
            .await
            .unwrap(),
        Outcome::Unknown,
        "no value is kept for a step whose handler returns none"
    );
    // The back pool's sweep settles it from the note: b becomes ready and is sent.
    q.settle_ended_steps().await.unwrap();
    let info = p.flow(&id).await.unwrap().unwrap();
    let a = info.steps.iter().find(|s| s.name == "a").unwrap();
    assert_eq!(a.state, StepState::Done);
    let d = q
        .claim_due(10, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(d.len(), 1, "b was sent once a was settled");
    assert_eq!(q.ack(&[d[0].receipt()]).await.unwrap(), [true]);
    q.settle_ended_steps().await.unwrap();
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
}

#[delay_listener(topic = "wu.unit")]
async fn unit(_n: u64) {}

static READ: Seen<(Option<()>, usize, usize)> = Seen::new();

#[delay_listener(topic = "wu.after")]
async fn after(_n: u64, deps: Dependencies) -> Result<(), String> {
    let one: Option<()> = deps.result("u0")?;
    let all: Vec<()> = deps.results_of_prefix("u")?;
    READ.push((one, all.len(), deps.all().len()));
    Ok(())
}

/// A runtime runs a fan-in of steps that return nothing: the flow ends done, nothing is kept
/// for them, and their dependent reads each as done, `()` from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_returning_nothing_keep_nothing_and_their_dependent_reads_them_done() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["wu.unit", "wu.after"]).await;
    let names: Vec<String> = (0..50).map(|i| format!("u{i}")).collect();
    let mut flow = Flow::new();
    for (i, n) in names.iter().enumerate() {
        flow = flow.step(n, "wu.unit", &(i as u64));
    }
    let flow = flow.step("last", "wu.after", &0u64).after(&names);
    let id = p.start_flow(flow).await.unwrap();
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    assert_eq!(READ.all(), [(Some(()), 50, 50)]);
    let info = p.flow(&id).await.unwrap().unwrap();
    let u0 = info.steps.iter().find(|s| s.name == "u0").unwrap();
    assert_eq!(
        p.result::<serde_json::Value>("wu.unit", &u0.message_id)
            .await
            .unwrap(),
        Outcome::Unknown
    );
    let mut c = server.connection();
    let kept: u64 = redis::cmd("HLEN")
        .arg("delayq:{wu.unit}:results")
        .query(&mut c)
        .unwrap();
    assert_eq!(kept, 0, "no value kept for the steps returning nothing");
    rt.shutdown().await.unwrap();
}

/// Two dependents with the same record text (same topic, options and edges): a step added
/// by their dependency is in each one's `after` once (the scripts decode a record text once
/// a call and share the table; the one that changes records must not change the shared one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_added_before_twin_dependents_is_in_each_ones_after_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let flow = Flow::new()
        .step("folder", "wu.folder", &0u64)
        .step("twin-a", "wu.twin", &1u64)
        .after(["folder"])
        .step("twin-b", "wu.twin", &1u64)
        .after(["folder"]);
    let id = p.start_flow(flow).await.unwrap();
    let q = queue(&p, "wu.folder").unwrap();
    let d = q
        .claim_due(1, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(d.len(), 1);
    assert!(p
        .add_flow_step(&d[0].id, "file-0", "wu.file", &7u64)
        .await
        .unwrap());
    let info = p.flow(&id).await.unwrap().unwrap();
    for twin in ["twin-a", "twin-b"] {
        let s = info.steps.iter().find(|s| s.name == twin).unwrap();
        let names: Vec<&str> = s.after.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["folder", "file-0"], "{twin}'s after");
    }
}
