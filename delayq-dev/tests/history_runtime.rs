//! The runtime writes each topic's history: what its handlers did, once a minute (a topic with
//! nothing counted only in minutes whose number is a multiple of five, so idle listeners cost
//! next to nothing), and the last counts at shutdown; two processes' counts add up.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{drained, producer, runtime, sleep_ms, RedisServer};
use delayq_runtime::delay_listener;

#[delay_listener(topic = "hist.work")]
async fn work(_: u32) {}

#[delay_listener(topic = "hist.fails", max_attempts = 2, backoff = "fixed(10ms)")]
async fn fails(_: u32) -> Result<(), String> {
    Err("declined".into())
}

#[delay_listener(topic = "hist.idle")]
async fn idle(_: u32) {}

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
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
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
async fn a_running_runtime_writes_after_each_minute_and_samples_idle_topics_every_fifth() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["hist.work", "hist.idle"]).await;
    let minute = minute_now();
    for i in 0..10u32 {
        p.send("hist.work", &i, Duration::ZERO).await.unwrap();
    }
    // Waiting in the idle topic, never due here.
    p.send("hist.idle", &0, Duration::from_secs(3_600))
        .await
        .unwrap();
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
    let idle = p
        .topic_history("hist.idle", Duration::from_secs(3_600))
        .await
        .unwrap();
    let stamps: Vec<u64> = idle
        .points
        .iter()
        .map(|p| p.at.duration_since(UNIX_EPOCH).unwrap().as_secs() / 60)
        .collect();
    println!("minute {minute} ended; the idle topic has points at {stamps:?}");
    if minute.is_multiple_of(5) {
        assert_eq!(
            stamps,
            vec![minute],
            "a fifth minute samples the idle topic"
        );
        assert_eq!((idle.points[0].delayed, idle.points[0].due), (1, 0));
    } else {
        assert!(
            stamps.is_empty(),
            "an idle topic written in minute {minute}"
        );
    }
    rt.shutdown().await.unwrap();
}
