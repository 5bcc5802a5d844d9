//! A topic's statistics for the CLI and the dashboard: counts, heads, the last minute's
//! outcomes and its flow control. Every number comes from a counter the scripts keep or from
//! the size of a known key, never from a scan.

use std::time::SystemTime;

use super::call::on_topic;
use super::queue::TopicQueue;
use crate::error::Result;
use crate::producer::Producer;
use crate::time::ms_to_time;

/// The width of the outcome buckets `prelude.lua` keeps (its `STATS_BUCKET_MS`).
const STATS_BUCKET_MS: u64 = 10_000;

/// Outcomes of handler runs over about the last minute (the buckets that overlap the last
/// 60 s, so 60 to 70 s).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcomes {
    /// Acknowledged.
    pub ok: u64,
    /// Failed (or their ack deadline passed) and scheduled again.
    pub retry: u64,
    /// Moved to the dead letters.
    pub dead: u64,
    /// Of those retried or moved to the dead letters, the runs stopped at the listener's
    /// `timeout`.
    pub timed_out: u64,
}

/// The state of one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicStats {
    /// The topic.
    pub topic: String,
    /// Waiting for their due time, or due and not yet claimed.
    pub delayed: usize,
    /// Claimed by a consumer and not acknowledged.
    pub inflight: usize,
    /// In the dead letters.
    pub dead: usize,
    /// The earliest due time among the delayed messages.
    pub next_due: Option<SystemTime>,
    /// The earliest ack deadline among the in-flight messages: the claim renewed least
    /// recently, which is where a stuck consumer shows first.
    pub oldest_claim_deadline: Option<SystemTime>,
    /// Outcomes over about the last minute.
    pub last_minute: Outcomes,
    /// The Redis server's clock when the numbers were read.
    pub read_at: SystemTime,
    /// Whether the topic is paused (`Producer::pause`): no process claims its messages.
    pub paused: bool,
    /// Dead letters dropped in all, oldest first, past the topic's `dead_max` or `dead_ttl`.
    pub dead_dropped: u64,
    /// The rate limit its listeners claim within (`100/s burst 10`), as the last runtime to
    /// start with the topic announced it; `None` when unlimited.
    pub rate: Option<String>,
}

fn first_score(v: &[(String, f64)]) -> Option<SystemTime> {
    v.first().map(|(_, s)| ms_to_time(*s as u64))
}

/// Sums the buckets of `fields` (`<outcome>:<bucket>` → count) that overlap the minute
/// before `now_ms`.
fn last_minute(fields: &[(String, u64)], now_ms: u64) -> Outcomes {
    let first_bucket = now_ms.saturating_sub(60_000) / STATS_BUCKET_MS;
    let mut out = Outcomes::default();
    for (field, n) in fields {
        let Some((outcome, bucket)) = field.split_once(':') else {
            continue;
        };
        if bucket.parse::<u64>().is_ok_and(|b| b >= first_bucket) {
            match outcome {
                "ok" => out.ok += n,
                "retry" => out.retry += n,
                "dead" => out.dead += n,
                "timeout" => out.timed_out += n,
                _ => {}
            }
        }
    }
    out
}

impl Producer {
    /// The counts, heads and last-minute outcomes of `topic`, read in one round trip.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn topic_stats(&self, topic: &str) -> Result<TopicStats> {
        let keys = self.keys(topic)?;
        let mut pipe = redis::pipe();
        pipe.zcard(&keys.delayed)
            .hmget(&keys.farinfo, &["count", "dead_dropped", "rate"])
            // Claims are scored below +inf: the set keeps one member more at +inf, so that
            // Redis holds it as a skiplist (see prelude.lua).
            .zcount(&keys.inflight, "-inf", "(+inf")
            .zcard(&keys.dead)
            .zrange_withscores(&keys.delayed, 0, 0)
            .zrange_withscores(&keys.far, 0, 0)
            .zrangebyscore_limit_withscores(&keys.inflight, "-inf", "(+inf", 0, 1)
            .hgetall(&keys.stats)
            .cmd("TIME")
            .exists(&keys.paused)
            .zcard(&keys.ready)
            .zrange_withscores(&keys.ready, 0, 0);
        let pipe = &pipe;
        type Reply = (
            usize,
            (Option<usize>, Option<u64>, Option<String>),
            usize,
            usize,
            Vec<(String, f64)>,
            Vec<(String, f64)>,
            Vec<(String, f64)>,
            Vec<(String, u64)>,
            (u64, u64),
            bool,
            usize,
            Vec<(String, f64)>,
        );
        let (
            hot,
            (far, dead_dropped, rate),
            inflight,
            dead,
            due,
            far_due,
            claim,
            fields,
            (secs, micros),
            paused,
            ready,
            ready_head,
        ): Reply = self
            .conn
            .retry_once(|| {
                on_topic(&self.conn, &keys, |mut conn| async move {
                    pipe.query_async(&mut conn).await
                })
            })
            .await?;
        let now_ms = secs * 1000 + micros / 1000;
        Ok(TopicStats {
            topic: keys.topic.clone(),
            delayed: hot + ready + far.unwrap_or(0),
            inflight,
            dead,
            // Messages in `ready` (priorities) are due: the first in line was due by now.
            // A far bucket's score is a lower bound of its earliest due time (exact unless
            // that message was cancelled or moved).
            next_due: [
                first_score(&due),
                first_score(&far_due),
                ready_head.first().map(|_| ms_to_time(now_ms)),
            ]
            .into_iter()
            .flatten()
            .min(),
            oldest_claim_deadline: first_score(&claim),
            last_minute: last_minute(&fields, now_ms),
            read_at: ms_to_time(now_ms),
            paused,
            dead_dropped: dead_dropped.unwrap_or(0),
            rate,
        })
    }
}

/// What a consumer tells the statistics of its topic.
impl TopicQueue {
    /// Records the rate limit in the topic's statistics (`TopicStats::rate`), for
    /// `delayq stats` and the dashboard; an unlimited queue clears it.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn announce_flow(&self) -> Result<()> {
        let info = self.keys.farinfo.clone();
        let shown = match (self.flow.rate, self.flow.rate_per_key) {
            (Some(r), None) => Some(format!("{r} burst {}", r.burst)),
            (Some(r), Some(k)) => Some(format!("{r} burst {}, {k} per key", r.burst)),
            (None, Some(k)) => Some(format!("{k} per key")),
            (None, None) => None,
        };
        on_topic(&self.conn, &self.keys, |mut c| async move {
            match shown {
                Some(shown) => {
                    redis::cmd("HSET")
                        .arg(&info)
                        .arg("rate")
                        .arg(shown)
                        .query_async::<()>(&mut c)
                        .await
                }
                None => {
                    redis::cmd("HDEL")
                        .arg(&info)
                        .arg("rate")
                        .query_async::<()>(&mut c)
                        .await
                }
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_minute_sums_the_buckets_that_overlap_it() {
        let now = 1_000_000_000_u64; // bucket 100,000
        let fields = vec![
            ("ok:100000".to_string(), 3),
            ("ok:99994".to_string(), 2),  // 60 s before now: overlaps
            ("ok:99993".to_string(), 50), // older
            ("retry:99999".to_string(), 4),
            ("dead:100000".to_string(), 1),
            ("junk".to_string(), 9),
        ];
        let o = last_minute(&fields, now);
        assert_eq!((o.ok, o.retry, o.dead, o.timed_out), (5, 4, 1, 0));
        let o = last_minute(&[("timeout:100000".to_string(), 2)], now);
        assert_eq!(o.timed_out, 2);
    }
}
