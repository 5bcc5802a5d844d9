//! Many schedules due at the same instant are written in concurrent calls, not one after
//! another: none is written so late that its tick counts as missed (and `catch_up = "none"`
//! skips it), even with a few milliseconds between the runtime and Redis (a proxy holds each
//! reply back, as a network path between hosts does).

use std::time::Duration;

use delayq_dev::{redis_ms, sleep_ms, BlackholeProxy, RedisServer};
use delayq_runtime::{delay_listener, Runtime};

#[delay_listener(topic = "burst.jobs")]
async fn job(_msg: u8) {}

const N: usize = 1_000;
/// The time each reply takes from Redis to the runtime.
const LATENCY: Duration = Duration::from_millis(5);

/// `N` hourly schedules whose next tick is `at`, written by hand in pipelines (so that all
/// fall due at the same instant).
fn records_due_at(server: &RedisServer, at: u64) {
    let mut c = server.connection();
    let at = at.to_string();
    for chunk in (0..N).collect::<Vec<_>>().chunks(1_000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            let name = format!("burst-{i:05}");
            pipe.cmd("HSET")
                .arg(format!("delayq:{{burst.jobs}}:schedule:{name}"))
                .arg(&[
                    ("kind", "every"),
                    ("spec", "3600000"),
                    ("tz", "UTC"),
                    ("catch_up", "none"),
                    ("owner", "dynamic"),
                    ("topic", "burst.jobs"),
                    ("payload", "1"),
                    ("next", &at),
                    ("anchor", &at),
                    ("missed", "0"),
                ])
                .ignore();
            pipe.cmd("HSET")
                .arg("delayq:registry:{schedules}")
                .arg(&name)
                .arg("burst.jobs")
                .ignore();
        }
        let _: () = pipe.query(&mut c).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_due_together_are_all_written_in_time() {
    let server = RedisServer::start();
    let at = redis_ms(&server) + 8_000;
    records_due_at(&server, at);
    let proxy = BlackholeProxy::start(server.port());
    let rt = Runtime::builder()
        .redis_url(proxy.url())
        .topics(["burst.jobs"])
        .spawn()
        .await
        .unwrap();
    proxy.delay_replies(LATENCY);
    // Past the instant and the second a tick may be late before it counts as missed.
    let wait = (at + 1_500).saturating_sub(redis_ms(&server));
    sleep_ms(wait).await;
    let mut c = server.connection();
    let mut pipe = redis::pipe();
    for i in 0..N {
        pipe.cmd("HGET")
            .arg(format!("delayq:{{burst.jobs}}:schedule:burst-{i:05}"))
            .arg("last");
    }
    let last: Vec<Option<u64>> = pipe.query(&mut c).unwrap();
    let written = last.iter().filter(|l| **l == Some(at)).count();
    rt.shutdown().await.unwrap();
    assert_eq!(
        written,
        N,
        "{} of {N} ticks due at the same instant were skipped as missed",
        N - written
    );
}
