//! A shutdown in the middle of a drain writes the last minute's history only after every run
//! whose ack was answered has counted it: what left Redis acked is what the topic's history
//! says was handled. (An ack lends its run's slot to the boss's next claim, or to the ack
//! call; the slot freed once the ack is answered let the shutdown see every slot free, and
//! write the history, before the run had counted its ack.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use delayq_dev::{producer, runtime, RedisServer, Seen};
use delayq_runtime::{delay_listener, Message};

static SEEN: Seen<u32> = Seen::new();

#[delay_listener(topic = "counts.drain", concurrency = 50, ack_timeout = "60s")]
async fn drain_handler(msg: Message<u32>) {
    if msg.payload().is_multiple_of(2) {
        tokio::task::yield_now().await;
    }
    SEEN.push(*msg.payload());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ack_answered_before_the_shutdown_is_in_the_history_it_writes() {
    delayq_dev::init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "counts.drain";
    let mut sent = 0usize;
    for round in 0..12u32 {
        let n = 3_000u32;
        p.send_batch(t, (0..n).map(|i| (round * n + i, Duration::ZERO)))
            .await
            .unwrap();
        sent += n as usize;
        let rt = runtime(&server, &[t]).await;
        // Shut down in the middle of the drain: acks riding on claims, slots lent.
        let target = SEEN.len() + 200 + 150 * round as usize;
        SEEN.wait_for(target, Duration::from_secs(60)).await;
        // Threads that compete for the cores: a run woken by its ack's answer may wait a
        // time slice before it counts (as on a loaded machine).
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..3)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let result = rt.shutdown().await;
        stop.store(true, Ordering::Relaxed);
        for s in spinners {
            s.join().unwrap();
        }
        result.unwrap();
        let stats = p.topic_stats(t).await.unwrap();
        let acked = sent - stats.delayed - stats.inflight - stats.dead;
        let h = p
            .topic_history(t, Duration::from_secs(3_600))
            .await
            .unwrap();
        let ok: u64 = h.points.iter().map(|p| p.ok).sum();
        println!("round {round}: acked in Redis {acked}, history ok {ok}");
        assert_eq!(
            ok, acked as u64,
            "round {round}: the history written at shutdown counts {ok} handled, Redis acked {acked}"
        );
    }
}
