//! `wait_flow` sleeps until the flow's end is announced: a wait on a running flow reads its
//! state when it starts and when it ends, not on a timer (it read it every 10 to 250 ms
//! before; this test fails on 582a5d9), and it still ends at once when the flow ends, and
//! by its timeout otherwise.

use std::time::{Duration, Instant};

use delayq_core::{Flow, FlowState};
use delayq_dev::{producer, runtime, RedisServer};

#[delayq_runtime::delay_listener(topic = "wfw.a")]
async fn step(_n: u64) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_wait_reads_nothing_while_it_sleeps_and_wakes_at_the_end() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let id = p
        .start_flow(
            Flow::new()
                .step("later", "wfw.a", &1u64)
                .delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    // Nobody runs it: the wait ends by its timeout, having read the state twice.
    let before = server.command_calls();
    let started = Instant::now();
    let state = p.wait_flow(&id, Duration::from_millis(1500)).await.unwrap();
    let took = started.elapsed();
    let after = server.command_calls();
    let hget = after.get("hget").copied().unwrap_or(0) - before.get("hget").copied().unwrap_or(0);
    assert_eq!(state, Some(FlowState::Running));
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    assert!(
        hget <= 3,
        "{hget} reads of the flow's state in a 1.5 s wait"
    );
    // A flow that ends wakes its wait: a second flow run by a runtime.
    let rt = runtime(&server, &["wfw.a"]).await;
    let quick = p
        .start_flow(Flow::new().step("now", "wfw.a", &2u64))
        .await
        .unwrap();
    let started = Instant::now();
    assert_eq!(
        p.wait_flow(&quick, Duration::from_secs(60)).await.unwrap(),
        Some(FlowState::Done)
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    // Cancelled: the first flow's wait ends at once too.
    let waiting = tokio::spawn({
        let (p, id) = (p.clone(), id.clone());
        async move { p.wait_flow(&id, Duration::from_secs(60)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    p.cancel_flow(&id).await.unwrap();
    assert_eq!(waiting.await.unwrap().unwrap(), Some(FlowState::Cancelled));
    assert_eq!(p.standing_waits(), (0, 0));
    rt.shutdown().await.unwrap();
}
