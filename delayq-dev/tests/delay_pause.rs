//! Pause and resume (#34 item 4): a paused topic is claimed by no process (the check is in
//! the claim script), sends keep arriving, running handlers finish, the state outlives the
//! processes; a resume delivers everything, once each.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use delayq_dev::{producer, sleep_ms, RedisServer};
use delayq_runtime::{delay_listener, Runtime, RuntimeHandle};

/// Every start: the payload and when it started.
static STARTS: Mutex<Vec<(u32, Instant)>> = Mutex::new(Vec::new());

#[delay_listener(topic = "pause.work", concurrency = 4)]
async fn work(n: u32) -> Result<(), String> {
    STARTS.lock().unwrap().push((n, Instant::now()));
    sleep_ms(20).await;
    Ok(())
}

fn started() -> usize {
    STARTS.lock().unwrap().len()
}

async fn runtime(server: &RedisServer) -> RuntimeHandle {
    Runtime::builder()
        .redis_url(server.url())
        .topics(["pause.work"])
        .spawn()
        .await
        .unwrap()
}

async fn wait_for(n: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    while started() < n {
        assert!(Instant::now() < deadline, "{} of {n} started", started());
        sleep_ms(10).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_stops_every_process_and_a_resume_delivers_everything_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let (a, b) = (runtime(&server).await, runtime(&server).await);
    p.send_batch("pause.work", (0..400u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    wait_for(40, Duration::from_secs(10)).await;
    assert!(p.pause("pause.work").await.unwrap(), "it was not paused");
    assert!(
        !p.pause("pause.work").await.unwrap(),
        "a second pause changes nothing"
    );
    let paused_at = Instant::now();
    // Sends keep arriving while paused.
    p.send_batch("pause.work", (400..500u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    sleep_ms(2_500).await;
    let late: Vec<u32> = STARTS
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, at)| *at > paused_at + Duration::from_secs(1))
        .map(|(n, _)| *n)
        .collect();
    assert!(
        late.is_empty(),
        "started over 1 s after the pause: {late:?}"
    );
    let before = started();
    assert!(before < 400, "everything ran before the pause: {before}");
    let counts = p.counts("pause.work").await.unwrap();
    assert_eq!(counts.delayed, 500 - before, "{counts:?}");
    assert_eq!(counts.inflight, 0, "running handlers finished: {counts:?}");
    assert!(p.is_paused("pause.work").await.unwrap());
    println!("paused after {before} of 500 had started; none started since");

    assert!(p.resume("pause.work").await.unwrap());
    wait_for(500, Duration::from_secs(30)).await;
    sleep_ms(300).await;
    let mut ran: Vec<u32> = STARTS.lock().unwrap().iter().map(|(n, _)| *n).collect();
    ran.sort_unstable();
    assert_eq!(ran, (0..500).collect::<Vec<_>>(), "each once, none lost");
    assert!(!p.is_paused("pause.work").await.unwrap());
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}
