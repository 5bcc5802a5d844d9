//! issue 31 item 8 (one malformed record stops everything) is not addressed, and the
//! new `misfire_after` field is one more way in: a record whose `misfire_after` (or `tz`, or
//! `next`) is hand-broken makes every runtime listening on its topic refuse to start, and
//! the other schedules of that topic stop with it.

use std::time::Duration;

use delayq_dev::{producer, RedisServer};
use delayq_runtime::{delay_listener, Runtime, Schedule};

#[delay_listener(topic = "review.broken")]
async fn h(_: u8) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_broken_record_does_not_stop_start() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let every = || Schedule::every(Duration::from_secs(1)).unwrap();
    p.upsert_schedule("good", every(), "review.broken", &1u8)
        .await
        .unwrap();
    p.upsert_schedule("bad", every(), "review.broken", &1u8)
        .await
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("delayq:{review.broken}:schedule:bad")
        .arg("misfire_after")
        .arg("soon")
        .query(&mut server.connection())
        .unwrap();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["review.broken"])
        .spawn()
        .await;
    match rt {
        Ok(h) => h.shutdown().await.unwrap(),
        Err(e) => panic!("one hand-broken record refused the start: {e}"),
    }
}
