//! The consumer's side of results: an ack that keeps the handler's value (`ack_keep.lua`),
//! and the topic's announcement of how long and how many it keeps.

use super::super::buckets::NONE;
use super::super::queue::TopicQueue;
use super::super::receipt::Receipt;
use super::super::scripts::{topic_script, SCRIPTS};
use crate::error::{Error, Result};

impl TopicQueue {
    /// Acks deliveries whose handlers returned a value, keeping each value (JSON) as the
    /// message's result for the topic's `result_ttl`, at most `results_max` kept; one answer
    /// each, in order: `true` acked, `false` stale (the value is not kept).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn ack_keep(&self, acks: &[(Receipt, Vec<u8>)]) -> Result<Vec<bool>> {
        if acks.is_empty() {
            return Ok(Vec::new());
        }
        let mut inv = topic_script(&SCRIPTS.ack_keep, &self.keys, &NONE);
        inv.arg(self.flow.result_ttl_ms)
            .arg(self.flow.results_max)
            .arg(acks.len());
        for ((id, token, window), value) in acks {
            inv.arg(id.as_str())
                .arg(*token)
                .arg(*window)
                .arg(value.as_slice());
        }
        let answer: String = self.invoke(&inv).await?;
        if answer.len() != acks.len() {
            return Err(Error::unexpected("ack_keep", &answer));
        }
        Ok(answer.bytes().map(|b| b == b'1').collect())
    }

    /// Announces whether this topic's listener keeps results (`keeps`), and for how long and
    /// how many (`results` in the topic's `farinfo`, removed when it keeps none): a `cancel`,
    /// which any producer makes, keeps the cancelled outcome with the same bounds.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn announce_results(&self, keeps: bool) -> Result<()> {
        let value = format!("{} {}", self.flow.result_ttl_ms, self.flow.results_max);
        let keys = self.keys.clone();
        super::super::call::on_topic(&self.conn, &self.keys, |mut c| async move {
            let mut cmd = redis::cmd(if keeps { "HSET" } else { "HDEL" });
            cmd.arg(&keys.farinfo).arg("results");
            if keeps {
                cmd.arg(value);
            }
            cmd.query_async::<()>(&mut c).await
        })
        .await
    }
}
