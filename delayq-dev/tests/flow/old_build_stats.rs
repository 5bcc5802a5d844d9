// Review: an old build (81f1b72, before flow control) running next to the new one during a
// rolling upgrade. Its prelude's `count()` (called by its ack, nack, requeue scripts) deletes
// every stats field that is not `<outcome>:<bucket>` whenever a 10 s bucket starts, so it
// wipes `dead_dropped` (a total "in all"), `rate_tat` (the rate limit's state: the next claim
// gets a fresh burst) and `rate` (what `delayq stats` shows), which now live in the same hash.

use std::time::Duration;

use delayq_core::protocol::{Flow, NackOutcome, TopicKeys};
use delayq_dev::{producer, RedisServer};
use delayq_runtime::__private::Rate;

/// Verbatim from `git show 81f1b72:delayq-core/src/scripts/delay/prelude.lua` (lines
/// 127-139), then what the old ack.lua does after acking: `count('ok', #done, now_ms())`.
const OLD_BUILD_COUNT: &str = r#"
local STATS_BUCKET_MS = 10000
local STATS_KEEP_BUCKETS = 12
local function count(outcome, n, now)
  if n == 0 then return end
  local bucket = math.floor(now / STATS_BUCKET_MS)
  if redis.call('HINCRBY', KEYS[6], outcome .. ':' .. bucket, n) == n then
    for _, field in ipairs(redis.call('HKEYS', KEYS[6])) do
      local b = tonumber(string.match(field, ':(%d+)$'))
      if not b or b < bucket - STATS_KEEP_BUCKETS then redis.call('HDEL', KEYS[6], field) end
    end
  end
end
local t = redis.call('TIME')
count('ok', 1, math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / 1000))
return 1
"#;

#[tokio::test]
async fn an_old_build_acking_next_to_the_new_one_keeps_dead_dropped_and_rate_tat() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let topic = "review.oldbuild";
    let q = delayq_core::protocol::queue(&p, topic)
        .unwrap()
        .with_flow(Flow {
            rate: Some(Rate::parse("1/m").unwrap()),
            dead_max: 1,
            ..Flow::default()
        });
    q.announce_flow().await.unwrap();
    // Three claims a minute apart are not possible at 1/m: bury through three queues that
    // claim without the limit, then take one claim at 1/m to set rate_tat.
    let free = delayq_core::protocol::queue(&p, topic)
        .unwrap()
        .with_flow(Flow {
            dead_max: 1,
            ..Flow::default()
        });
    p.send_batch(topic, (0..5u32).map(|n| (n, Duration::ZERO)))
        .await
        .unwrap();
    for c in free
        .claim_due(3, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed
    {
        let out = free
            .nack(&c.id, c.token(), Duration::ZERO, "", 16, Some("bad"))
            .await
            .unwrap();
        assert_eq!(out, NackOutcome::Dead);
    }
    assert_eq!(
        q.claim_due(10, Duration::from_secs(30))
            .await
            .unwrap()
            .claimed
            .len(),
        1
    );
    let before = p.topic_stats(topic).await.unwrap();
    assert_eq!(before.dead_dropped, 2, "{before:?}");
    let keys = TopicKeys::new("delayq", topic).unwrap();
    let mut c = server.connection();
    let tat_before: Option<String> = redis::cmd("HGET")
        .arg(&keys.farinfo)
        .arg("rate_tat")
        .query(&mut c)
        .unwrap();
    assert!(tat_before.is_some());

    // The old build acks one message (its first ack of this 10 s bucket).
    let mut eval = redis::cmd("EVAL");
    eval.arg(OLD_BUILD_COUNT).arg(10);
    for k in [
        &keys.delayed,
        &keys.inflight,
        &keys.msg,
        &keys.dead,
        &keys.seq,
        &keys.stats,
        &keys.far,
        &keys.far_index,
        &keys.farinfo,
        &keys.paused,
    ] {
        eval.arg(k);
    }
    let _: i64 = eval.query(&mut c).unwrap();

    let after = p.topic_stats(topic).await.unwrap();
    let tat_after: Option<String> = redis::cmd("HGET")
        .arg(&keys.farinfo)
        .arg("rate_tat")
        .query(&mut c)
        .unwrap();
    // With rate_tat gone, a 1/m topic takes another message at once (two in the same minute).
    let again = q
        .claim_due(10, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed
        .len();
    assert!(
        after.dead_dropped == 2 && tat_after.is_some() && after.rate.is_some() && again == 0,
        "after one ack by the old build: dead_dropped {} (was 2), rate_tat {tat_after:?} (was \
         {tat_before:?}), rate {:?}; a 1/m topic claimed {again} more in the same minute",
        after.dead_dropped,
        after.rate
    );
}
