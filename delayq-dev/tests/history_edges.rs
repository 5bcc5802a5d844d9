//! Histories at their edges: a schedule's counts are never lost (a tick running across the
//! minute's write, a write Redis refused); names that hold `:` never share a key (a schedule
//! `rep` and one named `rep:history`; groups `g` and `g:hours`); an id shaped like a tick of no
//! schedule writes nothing, even one named like another schedule's history; a suspended
//! schedule is never stalled, whatever is upserted or edited; a hand-edited point with huge
//! counts is read, not a panic.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_core::protocol::{queue, record_schedule_history, RedisConn, StreamGroup, Tally};
use delayq_dev::{keys, producer, sleep_ms, RedisServer, Seen};
use delayq_runtime::{scheduled, Runtime, Schedule, Tick};
use serde_json::json;

fn second_of_minute() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 60
}

async fn until_second_in(from: u64, to: u64) {
    while !(from..to).contains(&second_of_minute()) {
        sleep_ms(200).await;
    }
}

static SLOW: Seen<u64> = Seen::new();

/// Each tick's handler takes 4 s: one is always running when the minute's history write
/// takes the schedule's counts.
#[scheduled(name = "hist.slow", every = "1s")]
async fn slow(_tick: Tick) {
    tokio::time::sleep(Duration::from_secs(4)).await;
    SLOW.push(1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_running_across_the_minutes_write_is_counted_in_the_schedules_history() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .schedules(["hist.slow"])
        .shutdown_grace(Duration::from_secs(30))
        .spawn()
        .await
        .unwrap();
    SLOW.wait_for(1, Duration::from_secs(20)).await;
    // Past the next minute's write (2-3 s after the minute).
    until_second_in(50, 58).await;
    until_second_in(8, 12).await;
    p.suspend_schedule("hist.slow").await.unwrap();
    // Shutdown lets the running handler finish, then writes the last counts.
    rt.shutdown().await.unwrap();
    let handled = SLOW.len() as u64;
    let h = p
        .schedule_history("hist.slow", Duration::from_secs(3_600))
        .await
        .unwrap()
        .unwrap();
    let ok: u64 = h.points.iter().map(|p| p.ok).sum();
    let started: u64 = h.points.iter().map(|p| p.started).sum();
    let topic = p.schedule("hist.slow").await.unwrap().unwrap().topic;
    let th = p
        .topic_history(&topic, Duration::from_secs(3_600))
        .await
        .unwrap();
    let topic_ok: u64 = th.points.iter().map(|p| p.ok).sum();
    println!("handled {handled}; schedule history ok {ok} (started {started}); topic history ok {topic_ok}");
    assert_eq!(topic_ok, handled, "the topic's history: {th:?}");
    assert_eq!(ok, handled, "the schedule's history lost ticks: {h:?}");
}

static FAST: Seen<u64> = Seen::new();

#[scheduled(name = "hist.fast", every = "500ms")]
async fn fast(_tick: Tick) {
    FAST.push(1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_schedule_history_write_is_counted_into_the_next() {
    // Start early in a minute: no history write before the broken one.
    until_second_in(5, 35).await;
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .schedules(["hist.fast"])
        .shutdown_grace(Duration::from_secs(5))
        .spawn()
        .await
        .unwrap();
    FAST.wait_for(3, Duration::from_secs(20)).await;
    let topic = p.schedule("hist.fast").await.unwrap().unwrap().topic;
    let minutes_key = format!("delayq:{{{topic}}}:schedule-history:hist.fast");
    let mut c = server.connection();
    // The minute's write fails (WRONGTYPE: a stand-in for any refused write) ...
    until_second_in(50, 58).await;
    let exists: u64 = redis::cmd("EXISTS")
        .arg(&minutes_key)
        .query(&mut c)
        .unwrap();
    assert_eq!(exists, 0, "nothing written yet, nothing overwritten here");
    let _: () = redis::cmd("SET")
        .arg(&minutes_key)
        .arg("x")
        .query(&mut c)
        .unwrap();
    until_second_in(6, 10).await;
    // ... and the next ones can write again.
    let _: () = redis::cmd("DEL").arg(&minutes_key).query(&mut c).unwrap();
    sleep_ms(1_000).await;
    rt.shutdown().await.unwrap();
    let handled = FAST.len() as u64;
    let h = p
        .schedule_history("hist.fast", Duration::from_secs(3_600))
        .await
        .unwrap()
        .unwrap();
    let ok: u64 = h.points.iter().map(|p| p.ok).sum();
    let th = p
        .topic_history(&topic, Duration::from_secs(3_600))
        .await
        .unwrap();
    let topic_ok: u64 = th.points.iter().map(|p| p.ok).sum();
    println!("handled {handled}; schedule history ok {ok}; topic history ok {topic_ok}");
    assert_eq!(topic_ok, handled, "the topic's history: {th:?}");
    assert_eq!(
        ok, handled,
        "the counts of the failed write were not written later: {h:?}"
    );
}

fn keys_like(server: &RedisServer, pattern: &str) -> Vec<String> {
    let mut k: Vec<String> = redis::cmd("KEYS")
        .arg(pattern)
        .query(&mut server.connection())
        .unwrap();
    k.sort();
    k
}

fn one(ok: u64) -> Tally {
    Tally {
        ok,
        ..Tally::default()
    }
}

/// Two dynamic schedules on one topic, one named like the other's history: removing the first
/// keeps the second, and their histories are their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_whose_names_hold_colons_share_no_key() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let every = || Schedule::every(Duration::from_secs(3_600)).unwrap();
    p.upsert_schedule("rep", every(), "hist.jobs", &json!({"a": 1}))
        .await
        .unwrap();
    p.upsert_schedule("rep:history", every(), "hist.jobs", &json!({"b": 2}))
        .await
        .unwrap();
    let q = queue(&p, "hist.jobs").unwrap();
    assert!(record_schedule_history(&q, "rep", &one(1)).await.unwrap());
    assert!(record_schedule_history(&q, "rep:history", &one(2))
        .await
        .unwrap());
    let hour = Duration::from_secs(3_600);
    let ok =
        |h: Option<delayq_runtime::History>| h.unwrap().points.iter().map(|p| p.ok).sum::<u64>();
    assert_eq!(ok(p.schedule_history("rep", hour).await.unwrap()), 1);
    assert_eq!(
        ok(p.schedule_history("rep:history", hour).await.unwrap()),
        2
    );
    assert!(p.remove_schedule("rep").await.unwrap());
    let other = p.schedule("rep:history").await.unwrap();
    assert!(
        other.as_ref().is_some_and(|i| i.error.is_none()),
        "removing rep broke rep:history: {other:?}"
    );
    assert_eq!(
        ok(p.schedule_history("rep:history", hour).await.unwrap()),
        2
    );
    assert!(p.schedule_history("rep", hour).await.unwrap().is_none());
    let left = keys_like(&server, "*rep*");
    assert!(
        left.iter().all(|k| k.ends_with(":rep:history")),
        "rep's keys stayed: {left:?}"
    );

    // Ids shaped like ticks of no schedule: nothing written, however they are named.
    for name in ["nope", "rep:history:history", "rep"] {
        assert!(
            !record_schedule_history(&q, name, &one(5)).await.unwrap(),
            "{name}"
        );
    }
    assert_eq!(
        ok(p.schedule_history("rep:history", hour).await.unwrap()),
        2
    );
    let all = keys_like(&server, "*schedule-history*");
    assert_eq!(
        all.len(),
        2,
        "only rep:history's minutes and hours: {all:?}"
    );
}

/// Groups `g` and `g:hours` of one stream: four keys, each group reading its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_whose_names_hold_colons_share_no_key() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.publish("hist.s", &1u8).await.unwrap();
    let conn = RedisConn::connect(&server.url(), delayq_core::UrlOrigin::Default)
        .await
        .unwrap();
    for (group, n) in [("g", 3), ("g:hours", 4)] {
        let g = StreamGroup::new(conn.clone(), "hist.s", group, "c1").unwrap();
        g.create(true).await.unwrap();
        g.record_history(&one(n)).await.unwrap();
    }
    assert_eq!(keys_like(&server, "{hist.s}:history*").len(), 4);
    for (group, n, window) in [
        ("g", 3, 3_600),
        ("g", 3, 48 * 3_600),
        ("g:hours", 4, 3_600),
        ("g:hours", 4, 48 * 3_600),
    ] {
        let h = p
            .group_history("hist.s", group, Duration::from_secs(window))
            .await
            .unwrap();
        assert_eq!(
            h.points.iter().map(|p| p.ok).sum::<u64>(),
            n,
            "{group} over {window} s: {h:?}"
        );
    }
}

/// Suspended, a schedule is never stalled: not after an upsert that changes its spec (it stays
/// suspended), not with its `next` edited back in time by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_schedule_is_never_stalled() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let every = |s| Schedule::every(Duration::from_secs(s)).unwrap();
    p.upsert_schedule("hist.sus", every(1), "hist.sus.topic", &1u8)
        .await
        .unwrap();
    p.suspend_schedule("hist.sus").await.unwrap();
    p.upsert_schedule("hist.sus", every(2), "hist.sus.topic", &1u8)
        .await
        .unwrap();
    let info = p.schedule("hist.sus").await.unwrap().unwrap();
    assert!(
        info.suspended && info.next_at.is_none() && !info.stalled,
        "{info:?}"
    );
    let record = format!(
        "{}schedule:hist.sus",
        keys("hist.sus.topic")
            .delayed
            .strip_suffix("delayed")
            .unwrap()
    );
    let next: String = redis::cmd("HGET")
        .arg(&record)
        .arg("next")
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(next, "253402300799999", "an upsert resumed it");
    let _: () = redis::cmd("HSET")
        .arg(&record)
        .arg("next")
        .arg("1000")
        .query(&mut server.connection())
        .unwrap();
    let info = p.schedule("hist.sus").await.unwrap().unwrap();
    assert!(info.suspended && !info.stalled, "{info:?}");
    assert!(p.stalled_schedules().await.unwrap().is_empty());
    // Resumed, it is a schedule like any other again (and, left behind, stalled).
    p.resume_schedule("hist.sus").await.unwrap();
    let info = p.schedule("hist.sus").await.unwrap().unwrap();
    assert!(!info.suspended && info.next_at.is_some(), "{info:?}");
}

/// A point edited by hand with counts at the top of u64: read (saturating), never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edited_point_with_huge_counts_is_read() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "hist.huge";
    let mut c = server.connection();
    let (secs, _): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    let minute = secs / 60;
    let mut words = vec![minute.to_string()];
    words.extend(["1", "0", "0", "0", "0", "0", "0"].map(String::from));
    words.push(u64::MAX.to_string());
    words.push("1".into());
    words.extend(std::iter::repeat_n("0".to_string(), 13));
    let _: () = redis::cmd("HSET")
        .arg(&keys(t).history)
        .arg((minute % 1440).to_string())
        .arg(words.join(" "))
        .query(&mut c)
        .unwrap();
    let h = p
        .topic_history(t, Duration::from_secs(3_600))
        .await
        .unwrap();
    assert_eq!(h.points[0].started, u64::MAX, "{h:?}");
    assert_eq!(h.points[0].lateness_p99, Some(Duration::from_millis(1)));
}

#[delayq_runtime::delay_listener(topic = "hist.ids")]
async fn any_id(_: u32) {}

/// Ids shaped like ticks (`name@ms`) of 300 names that are no schedules: the shutdown's last
/// write makes one call for all of them (not one each), and writes nothing for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tick_shaped_ids_cost_one_call_per_topic_whatever_their_number() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["hist.ids"])
        .spawn()
        .await
        .unwrap();
    for i in 0..300u32 {
        let o = delayq_runtime::SendOptions::new().id(format!("user-{i}@1700000000000"));
        p.send_with("hist.ids", &i, o).await.unwrap();
    }
    delayq_dev::drained(&p, "hist.ids", Duration::from_secs(20)).await;
    // Not across a minute's write (then it would be that write's calls counted here).
    delayq_dev::clear_of_history_writes(Duration::from_secs(5)).await;
    server.reset_stats();
    rt.shutdown().await.unwrap();
    let calls = server.command_calls();
    let scripts =
        calls.get("evalsha").copied().unwrap_or(0) + calls.get("eval").copied().unwrap_or(0);
    // A script's first call here is refused (NOSCRIPT), loaded, and made again.
    let loads = calls.get("script|load").copied().unwrap_or(0);
    println!("the shutdown's calls: {calls:?}");
    assert!(
        scripts - loads <= 2,
        "{scripts} script calls ({loads} loads) for 300 names: {calls:?}"
    );
    assert!(keys_like(&server, "*schedule-history*").is_empty());
    let h = p
        .topic_history("hist.ids", Duration::from_secs(3_600))
        .await
        .unwrap();
    assert_eq!(h.points.iter().map(|p| p.ok).sum::<u64>(), 300, "{h:?}");
}
