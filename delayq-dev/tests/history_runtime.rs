//! The runtime writes the histories: each topic's (what its handlers did, once a minute; a
//! topic with nothing counted has its backlog sampled by the back pool's sweep, so idle
//! listeners cost no call more), each schedule's ticks', each stream group's and each
//! waiting room's, and the last counts at shutdown; two processes' counts add up; a message
//! whose id only looks like a tick's leaves no schedule history behind.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{drained, producer, runtime, sleep_ms, RedisServer, Seen};
use delayq_runtime::{
    delay_listener, scheduled, stream_listener, RoomConfig, Runtime, SendOptions, Tick, WaitingRoom,
};

#[delay_listener(topic = "hist.work")]
async fn work(_: u32) {}

#[delay_listener(topic = "hist.fails", max_attempts = 2, backoff = "fixed(10ms)")]
async fn fails(_: u32) -> Result<(), String> {
    Err("declined".into())
}

#[delay_listener(topic = "hist.idle")]
async fn idle(_: u32) {}

static TICKS: Seen<u64> = Seen::new();

#[scheduled(name = "hist.pulse", every = "200ms")]
async fn pulse(tick: Tick) {
    TICKS.push(tick.attempt() as u64);
}

#[stream_listener(stream = "hist.events", group = "audit")]
async fn audit(_: u32) {}

fn ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn minute_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 60
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runtimes_counts_add_up_and_shutdown_writes_the_last() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let a = runtime(&server, &["hist.work", "hist.fails"]).await;
    let b = runtime(&server, &["hist.work", "hist.fails"]).await;
    for i in 0..40u32 {
        p.send("hist.work", &i, Duration::ZERO).await.unwrap();
    }
    for i in 0..3u32 {
        p.send("hist.fails", &i, Duration::ZERO).await.unwrap();
    }
    drained(&p, "hist.work", Duration::from_secs(20)).await;
    let fails = drained(&p, "hist.fails", Duration::from_secs(20)).await;
    assert_eq!(fails.dead, 3);
    // Shut down in the first seconds of a minute (before its minute's write could run): the
    // last counts are of this minute, and are filed in it.
    while !(1_000..8_000).contains(&(ms_now() % 60_000)) {
        sleep_ms(100).await;
    }
    let minute = minute_now();
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    let h = p
        .topic_history("hist.work", Duration::from_secs(3_600))
        .await
        .unwrap();
    let with_counts: Vec<u64> = h
        .points
        .iter()
        .filter(|p| p.ok > 0)
        .map(|p| p.at.duration_since(UNIX_EPOCH).unwrap().as_secs() / 60)
        .collect();
    assert_eq!(with_counts, vec![minute], "filed in another minute: {h:?}");
    let h = p
        .topic_history("hist.work", Duration::from_secs(3_600))
        .await
        .unwrap();
    let sum = |f: fn(&delayq_core::HistoryPoint) -> u64| h.points.iter().map(f).sum::<u64>();
    assert_eq!((sum(|p| p.ok), sum(|p| p.started)), (40, 40), "{h:?}");
    assert!(h.points.iter().any(|p| p.lateness_p99.is_some()), "{h:?}");
    let h = p
        .topic_history("hist.fails", Duration::from_secs(3_600))
        .await
        .unwrap();
    let sum = |f: fn(&delayq_core::HistoryPoint) -> u64| h.points.iter().map(f).sum::<u64>();
    assert_eq!(
        (sum(|p| p.retry), sum(|p| p.dead), sum(|p| p.started)),
        (3, 3, 6),
        "{h:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_runtime_writes_after_each_minute_and_its_sweep_samples_idle_topics() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    // Waiting in the idle topic, never due here.
    p.send("hist.idle", &0, Duration::from_secs(3_600))
        .await
        .unwrap();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["hist.work", "hist.idle"])
        .waiting_room("hist.line", RoomConfig::fixed(1, 60_000))
        .spawn()
        .await
        .unwrap();
    let line = WaitingRoom::new(&p, "hist.line", RoomConfig::fixed(1, 60_000)).unwrap();
    for _ in 0..4 {
        line.enter().await.unwrap();
    }
    let minute = minute_now();
    for i in 0..10u32 {
        p.send("hist.work", &i, Duration::ZERO).await.unwrap();
    }
    drained(&p, "hist.work", Duration::from_secs(20)).await;
    // The writes 2-3 s after the minute ends.
    while minute_now() == minute {
        sleep_ms(500).await;
    }
    sleep_ms(5_000).await;
    let h = p
        .topic_history("hist.work", Duration::from_secs(3_600))
        .await
        .unwrap();
    assert_eq!(
        h.points.iter().map(|p| p.ok).sum::<u64>(),
        10,
        "written while running: {h:?}"
    );
    // The idle topic: nothing counted, so nothing of the minute's write; its backlog sampled
    // by the back pool's sweep (at start, then every two minutes), in the call it makes anyway.
    let idle = p
        .topic_history("hist.idle", Duration::from_secs(3_600))
        .await
        .unwrap();
    println!(
        "minute {minute} ended; the idle topic's points: {:?}",
        idle.points
    );
    assert!(!idle.points.is_empty(), "the sweep sampled nothing");
    for point in &idle.points {
        assert_eq!(
            (point.ok, point.started, point.delayed, point.due),
            (0, 0, 1, 0),
            "{point:?}"
        );
    }
    // The room, every minute.
    let room = p
        .room_history("hist.line", Duration::from_secs(3_600))
        .await
        .unwrap();
    assert_eq!(room.points.len(), 1, "{room:?}");
    assert_eq!(
        room.points[0].delayed + room.points[0].inflight,
        4,
        "{room:?}"
    );
    rt.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_and_stream_groups_have_histories_too() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .schedules(["hist.pulse"])
        .streams(["hist.events"])
        .topics(["hist.work"])
        .spawn()
        .await
        .unwrap();
    for i in 0..25u32 {
        p.publish("hist.events", &i).await.unwrap();
    }
    // Ids shaped like ticks of schedules that do not exist: counted, then kept nowhere.
    for i in 0..3u32 {
        let o = SendOptions::new().id(format!("no-such-schedule-{i}@1700000000000"));
        p.send_with("hist.work", &i, o).await.unwrap();
    }
    TICKS.wait_for(5, Duration::from_secs(10)).await;
    drained(&p, "hist.work", Duration::from_secs(20)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while delayq_dev::pending_entries(&server, "hist.events", "audit") > 0
        || p.stream_stats("hist.events").await.unwrap().groups[0].lag != Some(0)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the stream was not consumed"
        );
        sleep_ms(20).await;
    }
    rt.shutdown().await.unwrap();
    let ticks = TICKS.len() as u64;
    let hour = Duration::from_secs(3_600);
    let h = p
        .schedule_history("hist.pulse", hour)
        .await
        .unwrap()
        .unwrap();
    let ok: u64 = h.points.iter().map(|p| p.ok).sum();
    let started: u64 = h.points.iter().map(|p| p.started).sum();
    assert_eq!((ok, started), (ticks, ticks), "{h:?}");
    assert!(
        h.points.iter().all(|p| p
            .lateness_p99
            .is_some_and(|l| l <= Duration::from_millis(500))),
        "{h:?}"
    );
    let g = p.group_history("hist.events", "audit", hour).await.unwrap();
    assert_eq!(g.name, "hist.events/audit");
    assert_eq!(g.points.iter().map(|p| p.ok).sum::<u64>(), 25, "{g:?}");
    assert_eq!(
        (g.points[0].delayed, g.points[0].inflight),
        (0, 0),
        "lag and pending: {g:?}"
    );
    assert!(p
        .schedule_history("no-such-schedule-0", hour)
        .await
        .unwrap()
        .is_none());
    let mut c = server.connection();
    let junk: Vec<String> = redis::cmd("KEYS")
        .arg("*no-such-schedule*")
        .query(&mut c)
        .unwrap();
    assert!(junk.is_empty(), "{junk:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rooms_history_samples_waiting_and_inside() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let room = WaitingRoom::new(&p, "hist.sale", RoomConfig::fixed(2, 1_000)).unwrap();
    for _ in 0..5 {
        room.enter().await.unwrap();
    }
    room.admit().await.unwrap();
    room.record_history().await.unwrap();
    let h = p
        .room_history("hist.sale", Duration::from_secs(3_600))
        .await
        .unwrap();
    assert_eq!(h.points.len(), 1, "{h:?}");
    assert_eq!(
        (
            h.points[0].delayed,
            h.points[0].inflight,
            h.points[0].started
        ),
        (3, 2, 0)
    );
}
