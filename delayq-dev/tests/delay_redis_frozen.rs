//! Redis frozen with SIGSTOP for 10 s. In a test binary of its own, so the CPU time it measures
//! (the whole process's) is the runtime's alone.

use std::collections::BTreeSet;
use std::time::Duration;

use delayq_dev::RedisServer;
use delayq_dev::{init_tracing, producer, runtime, sleep_ms, Seen};
use delayq_runtime::delay_listener;

// --- SIGSTOP for 10 s -------------------------------------------------------------------

static FROZEN: Seen<u64> = Seen::new();

#[delay_listener(topic = "frozen", concurrency = 20)]
async fn frozen_handler(n: u64) {
    FROZEN.push(n);
}

fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_neither_panics_nor_spins_the_runtime_and_it_resumes() {
    init_tracing();
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["frozen"]).await;
    let items: Vec<_> = (0..300u64)
        .map(|n| (n, Duration::from_millis(n * 10)))
        .collect();
    p.send_batch("frozen", items).await.unwrap();
    sleep_ms(500).await;

    server.freeze();
    let cpu_before = cpu_time();
    let handled_before = FROZEN.len();
    sleep_ms(10_000).await;
    let cpu_during = cpu_time() - cpu_before;
    server.thaw();
    println!(
        "frozen 10 s: {handled_before} handled before, process CPU during the freeze {cpu_during:?}"
    );
    assert!(handled_before > 0 && handled_before < 300);
    assert!(
        cpu_during < Duration::from_secs(1),
        "the runtime spun: {cpu_during:?} CPU in 10 s"
    );

    FROZEN.wait_for(300, Duration::from_secs(60)).await;
    let handled: BTreeSet<u64> = FROZEN.all().into_iter().collect();
    assert_eq!(handled.len(), 300);
    delayq_dev::drained(&p, "frozen", Duration::from_secs(30)).await;
    rt.shutdown().await.unwrap();
}
