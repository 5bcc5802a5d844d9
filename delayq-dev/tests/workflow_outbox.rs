//! A flow's start cut short between two of its calls (its future dropped mid-send, as a
//! process killed there leaves it): no step that waits for the unsent ones is ever reached
//! through a settle, so only the sweep of the start's expired intent sends them. The flow
//! still ends done, each step run once, and no intent is left behind.

use std::time::Duration;

use delayq_core::{Flow, FlowId, FlowState};
use delayq_dev::{producer, runtime, sleep_ms, RedisServer, Seen};
use delayq_runtime::delay_listener;

static RUNS: Seen<u64> = Seen::new();

#[delay_listener(topic = "wfo.fan", concurrency = 50)]
async fn fan(n: u64) {
    RUNS.push(n);
}

const STEPS: u64 = 5_000;
const DELAYED: &str = "delayq:{wfo.fan}:delayed";
/// Where a start notes its intent (see intent.rs).
const SENDING: &str = "delayq:{flows}:starting";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_cut_short_mid_send_is_finished_by_the_sweep_of_its_intent() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let names: Vec<String> = (0..STEPS).map(|i| format!("s{i}")).collect();
    let mut flow = Flow::new();
    for (i, name) in names.iter().enumerate() {
        flow = flow.step(name, "wfo.fan", &(i as u64));
    }
    let flow = flow.step("last", "wfo.fan", &STEPS).after(&names);
    let start = tokio::spawn({
        let p = p.clone();
        async move { p.start_flow(flow).await }
    });
    // Cut short once some of its steps are in their topic.
    let mut c = server.connection();
    let card = |c: &mut redis::Connection, key: &str| -> u64 {
        redis::cmd("ZCARD").arg(key).query(c).unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while card(&mut c, DELAYED) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the start sent nothing"
        );
        sleep_ms(1).await;
    }
    start.abort();
    let _ = start.await;
    let sent = card(&mut c, DELAYED);
    assert!(
        sent < STEPS,
        "the start was not cut short ({sent} of {STEPS} sent): this test shows nothing"
    );
    // Its intent is left; expired by hand, as a minute passing would.
    let intents: Vec<String> = redis::cmd("ZRANGE")
        .arg(SENDING)
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(intents.len(), 1, "{intents:?}");
    redis::cmd("ZADD")
        .arg(SENDING)
        .arg(0)
        .arg(&intents[0])
        .query::<()>(&mut c)
        .unwrap();
    let flows: Vec<String> = redis::cmd("ZRANGE")
        .arg("delayq:{flows}:all")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    let id = FlowId::new(flows[0].clone()).unwrap();
    let rt = runtime(&server, &["wfo.fan"]).await;
    assert_eq!(
        p.wait_flow(&id, Duration::from_secs(120)).await.unwrap(),
        Some(FlowState::Done),
        "{:?}",
        p.flow(&id).await.unwrap().map(|f| f.state)
    );
    let mut runs = RUNS.all();
    runs.sort_unstable();
    let expected: Vec<u64> = (0..=STEPS).collect();
    assert_eq!(runs.len(), expected.len(), "runs: each step once");
    assert_eq!(runs, expected);
    let left: u64 = card(&mut c, SENDING);
    assert_eq!(left, 0, "an intent was left behind");
    rt.shutdown().await.unwrap();
}
