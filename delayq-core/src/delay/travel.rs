//! Time travel for the test kit (feature `testing`; nothing here exists without it): make
//! what is due within a duration due now, and tell whether a topic is idle. Two scripts of
//! their own (`scripts/delay/travel.lua`, `idle.lua`): no production script changes.

use super::buckets::{declaring, Buckets};
use super::keys::TopicKeys;
use super::scripts::{topic_script, FAR, FAR_PLACE, PRELUDE};
use crate::error::Result;
use crate::id::MessageId;
use crate::producer::Producer;
use crate::script::scripts;

scripts!(
    TravelScripts,
    TRAVEL_SCRIPTS,
    "delay/",
    format!("{PRELUDE}\n{FAR}\n{FAR_PLACE}"),
    [travel, idle]
);

/// `ms` passes for everything waiting in `topic` (delayed messages, retry backoffs, far
/// buckets): every due time moves `ms` earlier, in due order; the ticks in `ticks` (written
/// just now at their nominal times) move a further `extra` ms earlier; with `claims`, the ack
/// deadlines of claims in flight move `ms` earlier too. Returns how many messages are due now.
///
/// # Errors
/// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
pub async fn travel(
    producer: &Producer,
    topic: &str,
    ms: u64,
    ticks: &[MessageId],
    extra: u64,
    claims: bool,
) -> Result<u64> {
    let conn = &producer.conn;
    let keys = &TopicKeys::on(conn, producer.namespace(), topic)?;
    loop {
        // Every far bucket is declared, so that any whose time comes can be promoted.
        let far_key = &keys.far;
        let buckets: Vec<i64> = conn
            .run(|mut c| async move {
                redis::cmd("ZRANGE")
                    .arg(far_key)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let far = buckets
            .into_iter()
            .fold(Buckets::default(), |far, b| far.bucket(Some(b)));
        let (due, more): (u64, u8) = declaring(conn, keys, far, |far| {
            let mut inv = topic_script(&TRAVEL_SCRIPTS.travel, keys, far);
            inv.arg(ms).arg(if claims { "1" } else { "0" });
            for id in ticks {
                inv.arg(id.as_str()).arg(extra);
            }
            inv
        })
        .await?;
        if more == 0 {
            return Ok(due);
        }
    }
}

/// `(due now, claimed)` of `topic`: it is idle when both are 0.
///
/// # Errors
/// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
/// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
pub async fn idle_state(producer: &Producer, topic: &str) -> Result<(u64, u64)> {
    let conn = &producer.conn;
    let keys = &TopicKeys::on(conn, producer.namespace(), topic)?;
    declaring(conn, keys, Buckets::default(), |far| {
        topic_script(&TRAVEL_SCRIPTS.idle, keys, far)
    })
    .await
}
