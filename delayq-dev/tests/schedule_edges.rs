//! schedules that stop, against real Redis.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use delayq_core::protocol::Produced;
use delayq_dev::{producer, RedisServer};
use delayq_runtime::{CatchUp, Schedule};

fn hset(server: &RedisServer, key: &str, field: &str, value: &str) {
    let _: () = redis::cmd("HSET")
        .arg(key)
        .arg(field)
        .arg(value)
        .query(&mut server.connection())
        .unwrap();
}

fn hget(server: &RedisServer, key: &str, field: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(&mut server.connection())
        .unwrap()
}

/// Issue 31 item 1: the old calendar wrote `next = u64::MAX` and "a restart keeps it (the
/// upsert sees an unchanged spec)". A record in that state — written by the code before the
/// fix, and still in Redis when the fixed code is deployed — must not stay stopped: its spec
/// has a future instant. After a restart (the same upsert again), the next tick is still
/// u64::MAX and nothing is ever produced.
#[tokio::test]
async fn a_record_stopped_by_the_old_calendar_goes_on_after_an_upgrade() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let spec = || {
        Schedule::cron("*/15 * * * *")
            .unwrap()
            .tz("Europe/Berlin")
            .unwrap()
    };
    p.upsert_schedule("legacy", spec(), "rev.legacy", &1u8)
        .await
        .unwrap();
    let record = "delayq:{rev.legacy}:schedule:legacy";
    // What the old produce.rs wrote when cron_next gave None.
    hset(&server, record, "next", &u64::MAX.to_string());
    // The new code starts: the #[scheduled] fn / service upserts its unchanged schedule.
    p.upsert_schedule("legacy", spec(), "rev.legacy", &1u8)
        .await
        .unwrap();
    let mut state = p.schedule_state("legacy").await.unwrap().unwrap();
    let now = p.redis_now_ms().await.unwrap();
    let produced = p.produce_ticks(&mut state, now, 1_000).await.unwrap();
    let next = hget(&server, record, "next").unwrap();
    println!("after the restart: produced {produced:?}, next = {next}");
    let next: u64 = next.parse().unwrap();
    assert!(
        next <= now + 15 * 60_000,
        "the schedule stays stopped after the upgrade: next = {next} (now {now}), produced {produced:?}"
    );
}

/// `misfire_after` has a lower bound only. A threshold longer than the time since 1970
/// ("never count a tick as missed": 100 years) makes tick.lua's cutoff negative, below the
/// caller's `lo` of 0, so every call answers 'clock': the schedule never produces a tick.
#[tokio::test]
async fn a_long_misfire_after_does_not_stop_the_schedule() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let spec = Schedule::every(Duration::from_secs(1))
        .unwrap()
        .misfire_after(Duration::from_secs(100 * 365 * 86_400))
        .unwrap();
    p.upsert_schedule("patient", spec, "rev.patient", &1u8)
        .await
        .unwrap();
    let mut state = p.schedule_state("patient").await.unwrap().unwrap();
    let mut results = Vec::new();
    for _ in 0..3 {
        let now = p.redis_now_ms().await.unwrap();
        let r = p.produce_ticks(&mut state, now, 1_000).await;
        results.push(format!("{r:?}"));
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    println!("{results:#?}");
    assert!(
        results.iter().any(|r| r.starts_with("Ok(Ticks")),
        "no tick in 3 calls over ~2 s of an every-1s schedule: {results:#?}"
    );
}

/// `Schedule::every` accepts any interval of 10 ms or more; `next_ticks` on a huge one
/// (`Duration::MAX`, "practically never") panics on u64 overflow instead of answering.
#[test]
fn next_ticks_of_a_huge_interval_does_not_panic() {
    let every = Schedule::every(Duration::MAX).unwrap();
    let r = std::panic::catch_unwind(|| every.next_ticks(SystemTime::now(), 1));
    assert!(
        r.is_ok(),
        "next_ticks panicked (debug build: attempt to add with overflow)"
    );
}

/// Redis busy (another client's 30 ms commands back to back): an `every = "10ms"` schedule
/// that is behind (its next tick 2 minutes old, after an outage) gets "Redis' clock still
/// disagrees" from every call: the script insists that the caller's classification of missed
/// ticks holds at Redis' cutoff to within one interval, and each retry arrives later than
/// that. Redis' and the caller's clocks are the same clock here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frequent_schedule_that_is_behind_catches_up_while_redis_is_slow() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let spec = Schedule::every(Duration::from_millis(10))
        .unwrap()
        .catch_up(CatchUp::Last);
    p.upsert_schedule("fast", spec, "rev.fast", &1u8)
        .await
        .unwrap();
    let record = "delayq:{rev.fast}:schedule:fast";
    let busy = Arc::new(AtomicBool::new(true));
    let blocker = {
        let busy = busy.clone();
        let mut c = server.connection();
        std::thread::spawn(move || {
            while busy.load(Ordering::SeqCst) {
                // ~30 ms of server time, another application's slow script.
                let _: () = redis::cmd("EVAL")
                    .arg("local t = redis.call('TIME') local s = t[1]*1000000+t[2] local n = 0 while true do n = n + 1 if n % 1000 == 0 then local u = redis.call('TIME') if (u[1]*1000000+u[2]) - s > 30000 then break end end end return 0")
                    .arg(0)
                    .query(&mut c)
                    .unwrap();
            }
        })
    };
    let mut results = Vec::new();
    for _ in 0..5 {
        let now = p.redis_now_ms().await.unwrap();
        // Created long ago, two minutes behind (an outage): anchor and next on one grid.
        let behind = (now - 120_000) / 10 * 10;
        hset(&server, record, "anchor", &(behind - 3_600_000).to_string());
        hset(&server, record, "next", &behind.to_string());
        let mut state = p.schedule_state("fast").await.unwrap().unwrap();
        let now = p.redis_now_ms().await.unwrap();
        let r = p.produce_ticks(&mut state, now, 1_000).await;
        results.push(match r {
            Ok(Produced::Ticks { ticks, skipped }) => {
                format!("ticks: {} written, {skipped} skipped", ticks.len())
            }
            other => format!("{other:?}"),
        });
    }
    busy.store(false, Ordering::SeqCst);
    blocker.join().unwrap();
    println!("{results:#?}");
    let failed = results.iter().filter(|r| r.starts_with("Err")).count();
    assert_eq!(
        failed, 0,
        "calls that failed while Redis was slow: {results:#?}"
    );
}

/// The same over a link whose replies take 20 ms (another zone): Redis is idle, both clocks
/// are one clock, and still every call of an `every = "10ms"` schedule that is behind fails:
/// the script's 'clock' reply carries Redis' now, but the retry reaches Redis 20 ms later,
/// past the one-interval window the script insists on. The schedule never catches up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frequent_schedule_that_is_behind_catches_up_over_a_slow_link() {
    let server = RedisServer::start();
    let port: u16 = server
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let proxy = delayq_dev::BlackholeProxy::start(port);
    let p = delayq_runtime::Producer::connect(&proxy.url())
        .await
        .unwrap();
    let spec = Schedule::every(Duration::from_millis(10))
        .unwrap()
        .catch_up(CatchUp::Last);
    p.upsert_schedule("far", spec, "rev.far", &1u8)
        .await
        .unwrap();
    let record = "delayq:{rev.far}:schedule:far";
    proxy.delay_replies(Duration::from_millis(20));
    let mut results = Vec::new();
    for _ in 0..5 {
        let now = p.redis_now_ms().await.unwrap();
        let behind = (now - 120_000) / 10 * 10;
        hset(&server, record, "anchor", &(behind - 3_600_000).to_string());
        hset(&server, record, "next", &behind.to_string());
        let mut state = p.schedule_state("far").await.unwrap().unwrap();
        let now = p.redis_now_ms().await.unwrap();
        let r = p.produce_ticks(&mut state, now, 1_000).await;
        results.push(match r {
            Ok(Produced::Ticks { ticks, skipped }) => {
                format!("ticks: {} written, {skipped} skipped", ticks.len())
            }
            other => format!("{other:?}"),
        });
    }
    println!("{results:#?}");
    let failed = results.iter().filter(|r| r.starts_with("Err")).count();
    assert_eq!(
        failed, 0,
        "calls that failed over a 20 ms link: {results:#?}"
    );
}

/// `upsert_schedule` with such an interval: the anchor `now + interval` overflows (debug: a
/// panic in the caller's task; release: a wrapped anchor in the past).
#[tokio::test]
async fn upsert_of_a_huge_interval_answers_instead_of_panicking() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let joined = tokio::spawn(async move {
        let spec = Schedule::every(Duration::MAX).unwrap();
        p.upsert_schedule("never", spec, "rev.never", &1u8)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    match joined {
        Ok(r) => println!("answered: {r:?}"),
        Err(e) => panic!("upsert_schedule panicked: {e}"),
    }
}
