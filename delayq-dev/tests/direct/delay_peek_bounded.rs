//! `peek` (the CLI's and the dashboard's look at pending messages) never holds Redis for a
//! whole far bucket: with 100,000 messages in one bucket, every call it makes reads at most
//! about a thousand elements, and it still returns the earliest messages in order.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{parse_command_calls, producer, RedisServer};

const TOPIC: &str = "peek.far";
const N: usize = 100_000;
/// The default bucket width.
const WIDTH_MS: u64 = 60_000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Every far message of the topic as (due ms, id), read whole by the test (not by delayq).
fn all_far(server: &RedisServer) -> Vec<(u64, String)> {
    let mut c = server.connection();
    let buckets: Vec<String> = redis::cmd("ZRANGE")
        .arg(format!("delayq:{{{TOPIC}}}:far"))
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(buckets.len(), 1, "one bucket: {buckets:?}");
    let b: u64 = buckets[0].parse().unwrap();
    let records: Vec<(String, Vec<u8>)> = redis::cmd("HGETALL")
        .arg(format!("delayq:{{{TOPIC}}}:far:{b}"))
        .query(&mut c)
        .unwrap();
    let mut out: Vec<(u64, String)> = records
        .into_iter()
        .map(|(id, raw)| {
            // A fresh far record: `F<due - bucket start, base 36> <due - sent>\n<payload>`.
            let head = std::str::from_utf8(&raw[1..raw.iter().position(|&c| c == b' ').unwrap()])
                .unwrap()
                .to_string();
            (b * WIDTH_MS + u64::from_str_radix(&head, 36).unwrap(), id)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_into_a_far_bucket_of_100000_messages_reads_a_bounded_amount_per_call() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    // All due within a second of the middle of one bucket two hours ahead.
    let target = (now_ms() / WIDTH_MS + 120) * WIDTH_MS + WIDTH_MS / 2;
    for chunk in 0..N / 1_000 {
        let delay = Duration::from_millis(target - now_ms());
        let batch = (0..1_000).map(|i| ((chunk * 1_000 + i) as u64, delay));
        p.send_batch(TOPIC, batch).await.unwrap();
    }
    let expected = all_far(&server);
    assert_eq!(expected.len(), N);

    let mut c = server.connection();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    let first = p.peek(TOPIC, 0..3).await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    let calls = parse_command_calls(&info);
    let scripts =
        calls.get("evalsha").copied().unwrap_or(0) + calls.get("eval").copied().unwrap_or(0);
    let per_call = N as u64 / scripts.max(1);
    println!(
        "peek 0..3 over {N} messages in one bucket: {scripts} script calls, ~{per_call} elements each; {info}"
    );
    assert_eq!(calls.get("hgetall"), None, "no call reads a whole bucket");
    assert!(
        per_call <= 1_000,
        "about {per_call} elements read per call ({scripts} calls for {N} messages)"
    );
    let ids =
        |v: &[delayq_core::PendingMessage]| v.iter().map(|m| m.id.to_string()).collect::<Vec<_>>();
    let want = |r: std::ops::Range<usize>| {
        expected[r]
            .iter()
            .map(|(_, id)| id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&first), want(0..3), "the earliest three, in order");
    let deep = p.peek(TOPIC, 50_000..50_003).await.unwrap();
    assert_eq!(
        ids(&deep),
        want(50_000..50_003),
        "a page deep in the bucket"
    );
    let last = p.peek(TOPIC, N - 2..N + 5).await.unwrap();
    assert_eq!(
        ids(&last),
        want(N - 2..N),
        "the last page ends with the bucket"
    );
}
