// Review: a rate-limited topic with a backlog of due messages. Every send publishes
// WAKE_BOSS (send.lua wakes when `old_next <= now`, which is always true with a held-back
// backlog), and each woken boss runs claim_due, which the limit makes empty. So the claim
// calls follow the send rate, not the topic's rate: the boss spins while rate-limited.
// Failed at 9b494ae (302 claim calls for 300 sends in 2.3 s); passes at b8eee64 ("deaf" boss).

use std::time::{Duration, Instant};

use delayq_dev::{producer, sleep_ms, RedisServer};
use delayq_runtime::{delay_listener, Runtime};
use redis::Value;

#[delay_listener(topic = "review.spin", rate = "1/s")]
async fn slow_topic(_n: u32) {}

/// claim_due calls of the topic (its ARGV ends with the rate, `1000000 1` for 1/s, then the
/// rate per key, empty here) in the
/// server's slow log (every command is logged).
fn claim_calls(server: &RedisServer) -> usize {
    let mut c = server.connection();
    let log: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query(&mut c)
        .unwrap();
    log.iter()
        .filter(|entry| {
            let Value::Array(fields) = entry else {
                return false;
            };
            let Some(Value::Array(args)) = fields.get(3) else {
                return false;
            };
            let text: Vec<String> = args
                .iter()
                .map(|a| match a {
                    Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    other => format!("{other:?}"),
                })
                .collect();
            text.first().is_some_and(|c| {
                c.eq_ignore_ascii_case("evalsha") || c.eq_ignore_ascii_case("eval")
            }) && text.iter().rev().nth(1).is_some_and(|l| l == "1000000 1")
                && text.last().is_some_and(String::is_empty)
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_to_a_rate_limited_backlog_do_not_make_the_boss_claim_for_nothing() {
    let server = RedisServer::start();
    let mut c = crate::log_every_command(&server);
    let p = producer(&server).await;
    p.send_batch("review.spin", (0..50u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["review.spin"])
        .spawn()
        .await
        .unwrap();
    sleep_ms(1_500).await;
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query::<()>(&mut c)
        .unwrap();
    // 300 single sends, due now, over about 1.5 s, while the backlog is held back at 1/s.
    let started = Instant::now();
    for n in 0..300u32 {
        p.send("review.spin", &n, Duration::ZERO).await.unwrap();
        sleep_ms(5).await;
    }
    let secs = started.elapsed().as_secs_f64();
    sleep_ms(100).await;
    let claims = claim_calls(&server);
    rt.shutdown().await.unwrap();
    // At 1/s a boss needs about one claim a second (two or three, allowing for wake-ups).
    assert!(
        (claims as f64) <= 5.0 * secs.max(1.0),
        "{claims} claim_due calls in {secs:.1} s for a topic limited to 1/s (300 sends)"
    );
}
