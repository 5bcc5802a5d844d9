// Item 2, rate_per_key: one hot key with 10,000 due messages at 5/s never delays the other
// keys' due messages (99 other keys, each at its own pace; p99 lateness under 50 ms), the hot
// key drains at its rate across two runtimes, nothing is lost or run twice, and keys that went
// quiet hold no state after their window.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use delayq_core::protocol::TopicKeys;
use delayq_core::SendOptions;
use delayq_dev::{producer, sleep_ms, RedisServer};
use delayq_runtime::{delay_listener, Message};
use futures_util::StreamExt;

/// (key, payload, lateness past its due time, when it started).
static STARTS: Mutex<Vec<(String, u32, Duration, Instant)>> = Mutex::new(Vec::new());

#[delay_listener(topic = "flow.perkey", rate_per_key = "5/s", concurrency = 64)]
async fn per_key(msg: Message<(String, u32)>) {
    let late = SystemTime::now()
        .duration_since(msg.due_at())
        .unwrap_or_default();
    let (key, n) = msg.payload().clone();
    STARTS.lock().unwrap().push((key, n, late, Instant::now()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_key_drains_at_its_rate_and_never_delays_the_other_keys() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "flow.perkey";
    let keys = TopicKeys::new("delayq", t).unwrap();
    // 10,000 due now for the hot key, before any consumer runs.
    futures_util::stream::iter(0..10_000u32)
        .map(|n| {
            let p = p.clone();
            async move {
                let opts = SendOptions::new().key("hot");
                p.send_with(t, &("hot".to_string(), n), opts).await.unwrap();
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;
    let started = Instant::now();
    let mut runtimes = Vec::new();
    for _ in 0..2 {
        let rt = crate::runtime(&server, t).await;
        runtimes.push(rt);
    }
    // 99 other keys, three messages each, one a second per key, due 100 ms after each send.
    let mut others = 0;
    for round in 0..3u32 {
        for k in 0..99u32 {
            let key = format!("key-{k}");
            let opts = SendOptions::new()
                .key(key.clone())
                .delay(Duration::from_millis(100));
            p.send_with(t, &(key, round), opts).await.unwrap();
            others += 1;
            sleep_ms(10).await; // 99 keys over about a second
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let count_others = || {
        STARTS
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, ..)| k != "hot")
            .count()
    };
    while count_others() < others && Instant::now() < deadline {
        sleep_ms(20).await;
    }
    let window = started.elapsed();
    sleep_ms(1500).await; // past every other key's window
    let mut held: Vec<String> = redis::cmd("ZRANGE")
        .arg(&keys.keyrate)
        .arg(0)
        .arg(-1)
        .query(&mut server.connection())
        .unwrap();
    for rt in runtimes {
        rt.shutdown().await.unwrap();
    }

    let starts = STARTS.lock().unwrap().clone();
    let mut late: Vec<Duration> = starts
        .iter()
        .filter(|(k, ..)| k != "hot")
        .map(|s| s.2)
        .collect();
    late.sort();
    assert_eq!(late.len(), others, "every other key's message ran");
    let p99 = late[late.len() * 99 / 100 - 1];
    println!(
        "others: {} runs, p50 {:?}, p99 {:?}, max {:?}",
        late.len(),
        late[late.len() / 2],
        p99,
        late.last().unwrap()
    );
    assert!(
        p99 < Duration::from_millis(50),
        "the other keys' p99 lateness {p99:?}"
    );
    // Each run once.
    let mut seen = HashMap::new();
    for (k, n, ..) in &starts {
        *seen.entry((k.clone(), *n)).or_insert(0) += 1;
    }
    assert!(seen.values().all(|&c| c == 1), "a message ran twice");
    // The hot key at its rate: 5 a second (and its burst of 1) over the whole run.
    let mut hot: Vec<Instant> = starts
        .iter()
        .filter(|(k, ..)| k == "hot")
        .map(|s| s.3)
        .collect();
    hot.sort();
    let secs = (window + Duration::from_millis(1500)).as_secs_f64();
    println!("hot: {} starts in {secs:.2} s", hot.len());
    assert!(
        hot.len() as f64 <= 5.0 * secs + 2.0,
        "hot key ran {} times in {secs:.2} s",
        hot.len()
    );
    assert!(
        hot.len() as f64 >= 5.0 * secs - 4.0,
        "hot key starved: {} in {secs:.2} s",
        hot.len()
    );
    // At 5/s with a burst of 1, eleven starts span 2 s of Redis' clock. They are timed here
    // when the handler starts, which a loaded machine delays by tens of ms, and one start
    // delayed while the next is not brings two closer (a full run of the suite on two cores
    // saw six within 867 ms, where a quiet run sees 1 s): so eleven at a time, with a quarter
    // second for that, which still fails a limiter that lets 6 a second through (1.67 s).
    for pair in hot.windows(11) {
        assert!(
            pair[10] - pair[0] >= Duration::from_millis(1750),
            "eleven hot starts within {:?}",
            pair[10] - pair[0]
        );
    }
    // Quiet keys hold no state: only the hot key's two times are left (its promised starts,
    // `r`, and its actual starts, `s`).
    held.sort();
    assert_eq!(held, ["rhot", "shot"], "keys that went quiet kept their state");
}
