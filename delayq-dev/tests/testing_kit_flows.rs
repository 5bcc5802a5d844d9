//! Flows under the test kit: `run_until_idle` finishes what can run now (a step's end and the
//! send of what waited for it included), and `advance` lets a delayed step come due.

use std::time::Duration;

use delayq_dev::Seen;
use delayq_runtime::testing::TestRuntime;
use delayq_runtime::{delay_listener, Flow, FlowState};

static RAN: Seen<String> = Seen::new();

#[delay_listener(topic = "kitflow.step")]
async fn step(name: String) -> Result<String, String> {
    RAN.push(name.clone());
    Ok(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_until_idle_and_advance_finish_a_flow() {
    let t = TestRuntime::builder()
        .topics(["kitflow.step"])
        .start()
        .await
        .unwrap();
    let p = t.producer();
    let flow = Flow::new()
        .step("charge", "kitflow.step", &"charge")
        .step("pack", "kitflow.step", &"pack")
        .after(["charge"])
        .step("remind", "kitflow.step", &"remind")
        .after(["pack"])
        .delay(Duration::from_secs(86_400));
    let id = p.start_flow(flow).await.unwrap();
    t.run_until_idle().await.unwrap();
    assert_eq!(RAN.all(), ["charge", "pack"]);
    let state = p.flow(&id).await.unwrap().unwrap();
    assert_eq!(state.state, FlowState::Running);
    t.advance(Duration::from_secs(86_400)).await.unwrap();
    t.run_until_idle().await.unwrap();
    assert_eq!(RAN.all(), ["charge", "pack", "remind"]);
    assert_eq!(
        p.wait_flow(&id, Duration::from_secs(5)).await.unwrap(),
        Some(FlowState::Done)
    );
}
