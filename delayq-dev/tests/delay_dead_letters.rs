//! Dead letters under a running runtime: replaying all of them while the replayed messages
//! die again at once replays what was dead when the replay started, and ends.

use std::time::{Duration, Instant};

use delayq_dev::RedisServer;
use delayq_dev::{producer, runtime, sleep_ms};
use delayq_runtime::delay_listener;

const LETTERS: usize = 3_000;

/// Fails every time, with one attempt: every delivery dies at once.
#[delay_listener(topic = "dead.doomed", max_attempts = 1, concurrency = 200)]
async fn always_dies(_: u32) -> Result<(), String> {
    Err("doomed".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_all_dead_replays_what_was_dead_when_it_started_while_replays_die_again() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["dead.doomed"]).await;
    p.send_batch(
        "dead.doomed",
        (0..LETTERS as u32).map(|n| (n, Duration::ZERO)),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while p.counts("dead.doomed").await.unwrap().dead < LETTERS {
        assert!(Instant::now() < deadline, "not all dead yet");
        sleep_ms(20).await;
    }
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let replayed =
            tokio::time::timeout(Duration::from_secs(60), p.replay_all_dead("dead.doomed"))
                .await
                .expect("replay_all_dead did not end within 60 s")
                .unwrap();
        rounds.push(replayed);
        // Let the replayed ones die again before the next round.
        let deadline = Instant::now() + Duration::from_secs(60);
        while p.counts("dead.doomed").await.unwrap().dead < LETTERS {
            assert!(
                Instant::now() < deadline,
                "replayed letters did not die again"
            );
            sleep_ms(20).await;
        }
    }
    println!("replay_all_dead of {LETTERS} dead letters, 3 rounds: {rounds:?}");
    assert!(
        rounds.iter().all(|&n| n <= LETTERS),
        "replayed more than were dead at the start: {rounds:?}"
    );
    assert_eq!(rounds[0], LETTERS, "the first round replays all of them");
    rt.shutdown().await.unwrap();
}
