//! Schedules on each Redis deployment (single server, Cluster, Sentinel): a `#[scheduled]`
//! fn and a dynamic schedule tick on their grid, once each; listing and removal work. On a
//! cluster a schedule's record lives in its topic's slot and the index on its own, so the
//! index and the records of two topics sit on different shards.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{wait_until, Seen, TestRedis};
use delayq_runtime::{delay_listener, scheduled, Message, Runtime, Schedule, Tick};

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

delayq_dev::on_each_deployment!(ticks);

static CODE: Seen<u64> = Seen::new();
static DYNAMIC: Seen<(String, u64)> = Seen::new();

#[scheduled(name = "dep.sched", every = "250ms")]
async fn on_tick(tick: Tick) {
    CODE.push(ms(tick.scheduled_at()));
}

#[delay_listener(topic = "dep.sched.target")]
async fn on_target(msg: Message<String>) {
    DYNAMIC.push((msg.payload().clone(), ms(msg.due_at())));
}

fn assert_grid(times: &mut Vec<u64>, every: u64) {
    times.sort_unstable();
    let n = times.len();
    times.dedup();
    assert_eq!(times.len(), n, "a tick ran twice");
    for pair in times.windows(2) {
        assert_eq!(pair[1] - pair[0], every, "{times:?}");
    }
}

async fn ticks(kind: &str) {
    let redis = TestRedis::start(kind);
    let rt = Runtime::builder()
        .redis_url(redis.url())
        .schedules(["dep.sched"])
        .topics(["dep.sched.target"])
        .spawn()
        .await
        .unwrap();
    let p = rt.producer();
    p.upsert_schedule(
        &format!("dep.dynamic.{kind}"),
        Schedule::every(Duration::from_millis(300)).unwrap(),
        "dep.sched.target",
        &kind.to_string(),
    )
    .await
    .unwrap();
    // The three deployments' runs share the listeners: count this run's own.
    let code_from = CODE.len();
    wait_until(Duration::from_secs(30), "ticks of both schedules", || {
        CODE.len() >= code_from + 6 && DYNAMIC.all().iter().filter(|(k, _)| k == kind).count() >= 4
    })
    .await;
    let listed = p.schedules().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"dep.sched") && names.contains(&format!("dep.dynamic.{kind}").as_str()),
        "{names:?}"
    );
    assert!(p
        .remove_schedule(&format!("dep.dynamic.{kind}"))
        .await
        .unwrap());
    rt.shutdown().await.unwrap();
    let mut dynamic: Vec<u64> = DYNAMIC
        .all()
        .into_iter()
        .filter(|(k, _)| k == kind)
        .map(|(_, t)| t)
        .collect();
    assert_grid(&mut dynamic, 300);
    println!("{kind}: {} dynamic ticks on their grid", dynamic.len());
}
