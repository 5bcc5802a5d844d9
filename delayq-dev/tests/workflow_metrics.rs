//! Flow metrics count each step's end once, whoever settles it: the runtime after the ack, or
//! the back pool's sweep after a process died between the ack and the settle. The sweep's
//! settles were not counted before this test came (it fails on 097315a).

use std::time::Duration;

use delayq_core::protocol::queue;
use delayq_core::{Flow, FlowState};
use delayq_dev::{producer, sleep_ms, RedisServer};

#[delayq_runtime::delay_listener(topic = "wfm.a")]
async fn step(_n: u64) {}

use delayq_dev::metric_sum as metric;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_and_flows_are_counted_once_whether_the_runtime_or_the_sweep_settles_them() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    // A step acked by a process that died before it settled it: only its note is left.
    let orphan = p
        .start_flow(Flow::new().step("only", "wfm.a", &0u64))
        .await
        .unwrap();
    let q = queue(&p, "wfm.a").unwrap();
    let claimed = q
        .claim_due(1, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        q.ack_keep(&[(claimed[0].receipt(), b"null".to_vec())])
            .await
            .unwrap(),
        [true]
    );
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], delayq_dev::free_port()).into();
    let rt = delayq_runtime::Runtime::builder()
        .redis_url(server.url())
        .topics(["wfm.a"])
        .prometheus(addr)
        .spawn()
        .await
        .unwrap();
    // The back pool's first sweep settles it.
    assert_eq!(
        p.wait_flow(&orphan, Duration::from_secs(30)).await.unwrap(),
        Some(FlowState::Done)
    );
    let steps = r#"delayq_flow_steps_total"#;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while metric(addr, steps, &["outcome=\"done\""]) < 1.0 && std::time::Instant::now() < deadline {
        sleep_ms(50).await;
    }
    assert_eq!(
        metric(addr, steps, &["topic=\"wfm.a\"", "outcome=\"done\""]),
        1.0
    );
    assert_eq!(
        metric(addr, "delayq_flows_ended_total", &["state=\"done\""]),
        1.0
    );
    // Then a flow the runtime runs and settles itself: three more steps, one more flow.
    let chain = Flow::new()
        .step("one", "wfm.a", &1u64)
        .step("two", "wfm.a", &2u64)
        .after(["one"])
        .step("three", "wfm.a", &3u64)
        .after(["two"]);
    let id = p.start_flow(chain).await.unwrap();
    assert_eq!(
        p.wait_flow(&id, Duration::from_secs(30)).await.unwrap(),
        Some(FlowState::Done)
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while metric(addr, steps, &["outcome=\"done\""]) < 4.0 && std::time::Instant::now() < deadline {
        sleep_ms(50).await;
    }
    // A moment more: a double count would show.
    sleep_ms(300).await;
    assert_eq!(
        metric(addr, steps, &["topic=\"wfm.a\"", "outcome=\"done\""]),
        4.0
    );
    assert_eq!(metric(addr, steps, &["outcome=\"failed\""]), 0.0);
    assert_eq!(
        metric(addr, "delayq_flows_ended_total", &["state=\"done\""]),
        2.0
    );
    rt.shutdown().await.unwrap();
}
