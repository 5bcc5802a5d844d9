//! In an outage where Redis goes silent (every connection, old and new, black-holed: no FIN,
//! no RST), a call fails within the response timeout however many callers fail together:
//! they start one reopen in the background instead of each reopening in turn.

use std::time::{Duration, Instant};

use delayq_dev::{BlackholeProxy, RedisServer};
use delayq_runtime::Producer;

/// The connection's response timeout (10 s) and room for a slow machine.
const BOUND: Duration = Duration::from_secs(25);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_callers_in_a_silent_outage_each_fail_within_the_response_timeout() {
    delayq_dev::init_tracing();
    let server = RedisServer::start();
    let proxy = BlackholeProxy::start(server.port());
    let p = Producer::connect(&proxy.url()).await.unwrap();
    p.send("outage.t", &0u32, Duration::from_secs(60))
        .await
        .unwrap();
    proxy.blackhole_all();
    let started = Instant::now();
    let calls: Vec<_> = (0..50u32)
        .map(|i| {
            let p = p.clone();
            tokio::spawn(async move {
                let t = Instant::now();
                let r = p.send("outage.t", &i, Duration::from_secs(60)).await;
                (r.is_err(), t.elapsed())
            })
        })
        .collect();
    let mut longest = Duration::ZERO;
    for call in calls {
        let (failed, took) = call.await.unwrap();
        assert!(failed, "a send into a silent Redis cannot succeed");
        longest = longest.max(took);
    }
    let connections = proxy.connections();
    println!(
        "50 calls failed, the longest after {longest:?} (all within {:?}); {connections} connections opened in all",
        started.elapsed()
    );
    assert!(
        longest < BOUND,
        "a call took {longest:?}: callers waited for each other's reopens"
    );
    // Redis back: the next calls go through on a new connection.
    proxy.restore();
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        if p.send("outage.t", &99u32, Duration::from_secs(60))
            .await
            .is_ok()
        {
            break;
        }
        assert!(Instant::now() < deadline, "sends never recovered");
    }
}
