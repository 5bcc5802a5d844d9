//! An operator's calls on each Redis deployment (a single server, a Cluster, Sentinel): find a
//! message (hot, far, dead, unknown), read each kind of history (a topic's written by a real
//! runtime, a schedule's, a stream group's, a room's), suspend, resume and run a schedule now.
//! Each history lives in the slot of what it describes, so every call is one slot's.

use std::time::Duration;

use delayq_core::protocol::{queue, record_schedule_history, RedisConn, StreamGroup, Tally};
use delayq_dev::TestRedis;
use delayq_runtime::{
    delay_listener, MessageId, Place, Producer, RoomConfig, Runtime, Schedule, ScheduleChange,
    SendOptions, WaitingRoom,
};
use serde_json::{json, Value};

#[delay_listener(topic = "dep.ops", max_attempts = 1)]
async fn ops(msg: Value) -> Result<(), String> {
    if msg["fail"] == true {
        return Err("declined".into());
    }
    Ok(())
}

delayq_dev::on_each_deployment!(operations);

async fn operations(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = Producer::connect(&redis.url()).await.unwrap();
    let t = "dep.ops";
    let rt = Runtime::builder()
        .redis_url(redis.url())
        .topics([t])
        .spawn()
        .await
        .unwrap();
    for i in 0..10u32 {
        let o = SendOptions::new().id(format!("ops-{i}"));
        p.send_with(t, &json!({"i": i, "fail": i == 3}), o)
            .await
            .unwrap();
    }
    let later = SendOptions::new()
        .id("ops-later")
        .delay(Duration::from_secs(3_600));
    p.send_with(t, &json!({"later": true}), later)
        .await
        .unwrap();
    let far = SendOptions::new()
        .id("ops-far")
        .delay(Duration::from_secs(90 * 86_400));
    p.send_with(t, &json!({"far": true}), far).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let c = p.counts(t).await.unwrap();
        if (c.delayed, c.inflight, c.dead) == (2, 0, 1) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{kind}: {c:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rt.shutdown().await.unwrap();

    // Find.
    let find = |id: &str| {
        let p = p.clone();
        let id = MessageId::new(id).unwrap();
        async move { p.find(t, &id).await.unwrap() }
    };
    assert!(
        matches!(find("ops-later").await.place, Place::Delayed { .. }),
        "{kind}"
    );
    let f = find("ops-far").await;
    assert!(matches!(f.place, Place::Delayed { .. }), "{kind}: {f:?}");
    assert_eq!(f.payload, br#"{"far":true}"#);
    let f = find("ops-3").await;
    assert!(matches!(f.place, Place::Dead { .. }), "{kind}: {f:?}");
    assert_eq!(f.last_error.as_deref(), Some("declined"));
    assert_eq!(find("ops-1").await.place, Place::Unknown, "{kind}: acked");

    // The topic's history, from the runtime's last write at shutdown.
    let hour = Duration::from_secs(3_600);
    let h = p.topic_history(t, hour).await.unwrap();
    let (ok, dead): (u64, u64) = (
        h.points.iter().map(|p| p.ok).sum(),
        h.points.iter().map(|p| p.dead).sum(),
    );
    assert_eq!((ok, dead), (9, 1), "{kind}: {h:?}");
    assert_eq!(
        h.points.last().unwrap().delayed,
        2,
        "{kind}: the later and the far one"
    );

    // A schedule: suspend, run now, resume; its history.
    p.upsert_schedule(
        "dep.ops.nightly",
        Schedule::cron("0 3 * * *").unwrap(),
        t,
        &json!({"job": 1}),
    )
    .await
    .unwrap();
    assert_eq!(
        p.suspend_schedule("dep.ops.nightly").await.unwrap(),
        ScheduleChange::Changed
    );
    assert!(
        p.schedule("dep.ops.nightly")
            .await
            .unwrap()
            .unwrap()
            .suspended,
        "{kind}"
    );
    let tick = p
        .run_schedule_now("dep.ops.nightly")
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(p.find(t, &tick).await.unwrap().place, Place::Delayed { .. }),
        "{kind}"
    );
    assert_eq!(
        p.resume_schedule("dep.ops.nightly").await.unwrap(),
        ScheduleChange::Changed
    );
    let mut late = Tally {
        ok: 1,
        ..Tally::default()
    };
    late.lateness[Tally::bin(Duration::from_millis(3))] = 1;
    let q = queue(&p, t).unwrap();
    assert!(record_schedule_history(&q, "dep.ops.nightly", &late)
        .await
        .unwrap());
    let s = p
        .schedule_history("dep.ops.nightly", hour)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        s.points[0].lateness_p99,
        Some(Duration::from_millis(5)),
        "{kind}: {s:?}"
    );

    // A stream group and a room.
    p.publish("dep.ops.events", &1).await.unwrap();
    let conn = RedisConn::connect(&redis.url(), delayq_core::UrlOrigin::Default)
        .await
        .unwrap();
    let group = StreamGroup::new(conn, "dep.ops.events", "audit", "c1").unwrap();
    group.create(true).await.unwrap();
    group.record_history(&Tally::default()).await.unwrap();
    let g = p
        .group_history("dep.ops.events", "audit", hour)
        .await
        .unwrap();
    assert_eq!(
        (g.points[0].delayed, g.points[0].inflight),
        (1, 0),
        "{kind}: lag 1: {g:?}"
    );
    let room = WaitingRoom::new(&p, "dep.ops.sale", RoomConfig::fixed(1, 1_000)).unwrap();
    room.enter().await.unwrap();
    room.record_history().await.unwrap();
    let r = p.room_history("dep.ops.sale", hour).await.unwrap();
    assert_eq!(r.points[0].delayed, 1, "{kind}: {r:?}");
}
