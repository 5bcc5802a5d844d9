//! The waiting room on each Redis deployment: a single server, a Redis Cluster (3 primaries,
//! a replica each) and Sentinel. Every key of a room shares its hash tag, so each script runs
//! on one shard; the runtime ticks it under the lease on each.

use std::time::Duration;

use delayq_dev::{sleep_ms, TestRedis};
use delayq_runtime::{Producer, RoomConfig, RoomStatus, Runtime, WaitingRoom};

delayq_dev::on_each_deployment!(waiting_room);

async fn waiting_room(kind: &str) {
    let redis = TestRedis::start(kind);
    let p = Producer::connect(&redis.url())
        .await
        .expect("connect a producer");
    let config = RoomConfig::default()
        .admit_per_tick(5)
        .capacity(Some(8))
        .tick(Duration::from_millis(100));
    let room = WaitingRoom::new(&p, "dep.sale", config).unwrap();
    let mut tokens = Vec::new();
    for _ in 0..20 {
        tokens.push(room.enter().await.unwrap());
    }
    match room.status(&tokens[19]).await.unwrap() {
        RoomStatus::Waiting { position, .. } => assert_eq!(position, 20, "{kind}"),
        other => panic!("{kind}: {other:?}"),
    }
    assert!(room.leave(&tokens[19]).await.unwrap());
    let rt = Runtime::builder()
        .redis_url(redis.url())
        .leader_tasks(Vec::<String>::new())
        .waiting_room("dep.sale", config)
        .spawn()
        .await
        .expect("spawn the runtime");
    // Ticks admit 5, then 3 more up to the capacity of 8, and no more while nobody completes.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while room.counts().await.unwrap().active < 8 {
        assert!(tokio::time::Instant::now() < deadline, "{kind}: not filled");
        sleep_ms(50).await;
    }
    sleep_ms(400).await;
    let counts = room.counts().await.unwrap();
    assert_eq!((counts.active, counts.waiting), (8, 11), "{kind}");
    for t in &tokens[..8] {
        assert!(
            matches!(room.status(t).await.unwrap(), RoomStatus::Active { .. }),
            "{kind}"
        );
    }
    match room.status(&tokens[8]).await.unwrap() {
        RoomStatus::Waiting { position, eta, .. } => {
            assert_eq!(position, 1, "{kind}");
            assert!(eta.is_some(), "{kind}: ticks have run, so there is a rate");
        }
        other => panic!("{kind}: {other:?}"),
    }
    // Two complete: the next ticks let two more in.
    assert!(room.complete(&tokens[0]).await.unwrap());
    assert!(room.complete(&tokens[1]).await.unwrap());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !matches!(
        room.status(&tokens[9]).await.unwrap(),
        RoomStatus::Active { .. }
    ) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{kind}: no slot freed"
        );
        sleep_ms(50).await;
    }
    sleep_ms(400).await;
    let counts = room.counts().await.unwrap();
    assert_eq!((counts.active, counts.waiting), (8, 9), "{kind}");
    assert_eq!(room.status(&tokens[0]).await.unwrap(), RoomStatus::Unknown);
    rt.shutdown().await.unwrap();
}
