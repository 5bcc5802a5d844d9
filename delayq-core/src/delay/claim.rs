//! The claim: due messages to in-flight, each delivered under the claim's fence token; the
//! acks a consumer has ready ride on it (one call, not two).

use std::time::Duration;

use redis::Value;

use super::buckets::Buckets;
use super::envelope::Envelope;
use super::queue::{optional_ms, TopicQueue, MAX_CLAIM_BATCH};
use super::receipt::Receipt;
use super::scripts;
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::time::millis;

/// One claimed delivery: the message and the fence token its acks must present.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The message id.
    pub id: MessageId,
    /// The envelope, attempt already counting this delivery.
    pub envelope: Envelope,
}

impl Delivery {
    /// The fence token of this delivery.
    pub fn token(&self) -> u64 {
        self.envelope.token
    }

    /// What its ack presents: the id, the fence token and the `dedup_for` window (ms, 0 for
    /// none) the ack reserves the id for.
    pub fn receipt(&self) -> Receipt {
        (self.id.clone(), self.envelope.token, self.envelope.dedup_ms)
    }
}

/// What one `claim_due` call found.
#[derive(Debug, Default)]
pub struct ClaimBatch {
    /// Redis' clock when the claim ran (ms).
    pub now_ms: u64,
    /// The same instant in microseconds.
    pub now_us: u64,
    /// When the earliest message still delayed is due (ms), if any.
    pub next_due_ms: Option<u64>,
    /// The claimed deliveries.
    pub claimed: Vec<Delivery>,
    /// Claimed ids that cannot be delivered, with the reason: an envelope that does not parse
    /// (moved to the dead letters) or is missing (dropped).
    pub undeliverable: Vec<(MessageId, String)>,
    /// How many of `undeliverable` went to the dead letters.
    pub buried: u64,
    /// The topic is paused: nothing was claimed, and nothing will be until it is resumed
    /// (a resume wakes the bosses).
    pub paused: bool,
    /// Due messages wait on the topic's rate limit: `next_due_ms` is when it lets the next
    /// one go, and no send or retry can make a claim before then take anything.
    pub rate_limited: bool,
    /// The answers to the acks that rode on the claim (see
    /// [`claim_acking`](TopicQueue::claim_acking)), in their order: `true` acked, `false` stale.
    pub acked: Vec<bool>,
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// The far buckets a claim's reply names for the next claim to declare: one (an integer, -1
/// for none), or those due for promotion when it was behind (a string of numbers).
fn far_heads(v: &Value) -> Option<Vec<i64>> {
    if let Value::BulkString(b) = v {
        if b.contains(&b' ') || b.is_empty() {
            let text = std::str::from_utf8(b).ok()?;
            return text
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().ok())
                .collect();
        }
    }
    let head = int(v)?;
    Some(if head >= 0 { vec![head] } else { Vec::new() })
}

fn text(v: Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

impl TopicQueue {
    fn far_heads(&self) -> Vec<i64> {
        self.far_heads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Moves up to `max` (at most 1,000) due messages to in-flight with an ack deadline `lease`
    /// from now.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call;
    /// [`Error::CorruptEnvelope`](crate::Error::CorruptEnvelope) is not returned: such messages
    /// are dead-lettered.
    pub async fn claim_due(&self, max: usize, lease: Duration) -> Result<ClaimBatch> {
        self.claim_acking(max, lease, &[]).await
    }

    /// [`claim_due`](Self::claim_due) carrying acks: the acks are done in the same script
    /// call, after the claim (a claim that fails fails before them), paused or not, and
    /// their answers are [`ClaimBatch::acked`], as [`ack`](Self::ack)'s. Beyond 1,000 acks,
    /// the rest go in calls of their own first.
    ///
    /// # Errors
    /// As `claim_due`'s; when the call fails, the acks' outcome is unknown, as when an ack
    /// call fails (an error the script raised: not done).
    pub async fn claim_acking(
        &self,
        max: usize,
        lease: Duration,
        acks: &[Receipt],
    ) -> Result<ClaimBatch> {
        let (acks, early) = if acks.len() > MAX_CLAIM_BATCH {
            let (rest, riding) = acks.split_at(acks.len() - MAX_CLAIM_BATCH);
            (riding, self.ack(rest).await?)
        } else {
            (acks, Vec::new())
        };
        let k = &self.keys;
        let far = Buckets::default().buckets(self.far_heads());
        let (call, order) = scripts::claim_due(
            k,
            &far,
            (max.clamp(1, MAX_CLAIM_BATCH), millis(lease)),
            &self.flow,
            acks,
        );
        let reply: Vec<Value> = self.invoke(&call).await?;
        let bad = |what: &dyn std::fmt::Debug| Error::unexpected("claim_due", &what);
        let mut it = reply.into_iter();
        let (Some(now), Some(next), Some(head), Some(limited), Some(token), Some(answers)) = (
            it.next(),
            it.next(),
            it.next(),
            it.next(),
            it.next(),
            it.next(),
        ) else {
            return Err(bad(&"a short reply"));
        };
        let heads = far_heads(&head).ok_or_else(|| bad(&head))?;
        let next = int(&next).ok_or_else(|| bad(&next))?;
        let paused = next == -2;
        if !paused {
            *self.far_heads.lock().unwrap_or_else(|p| p.into_inner()) = heads;
        }
        let mut acked = early;
        match &answers {
            Value::BulkString(a) => acked.extend(
                order
                    .restore(a.iter().map(|c| *c == b'1'))
                    .ok_or_else(|| bad(&answers))?,
            ),
            // An empty string may come back as nil over RESP2 from Lua's "" in some versions.
            Value::Nil if acks.is_empty() => {}
            other => return Err(bad(other)),
        }
        let mut batch = ClaimBatch {
            now_us: int(&now).ok_or_else(|| bad(&now))? as u64,
            next_due_ms: optional_ms(next),
            paused,
            rate_limited: int(&limited) == Some(1),
            acked,
            ..ClaimBatch::default()
        };
        batch.now_ms = batch.now_us / 1000;
        let token = int(&token).ok_or_else(|| bad(&token))? as u64;
        let (ids, envelopes) = match (it.next(), it.next()) {
            (Some(Value::Array(ids)), Some(Value::Array(envs))) if ids.len() == envs.len() => {
                (ids, envs)
            }
            (None, None) => (Vec::new(), Vec::new()),
            other => return Err(bad(&other)),
        };
        // Dead letters dropped past the bounds, by moving one that was not an envelope there.
        if let Some(dropped) = it.next() {
            let dropped = int(&dropped).ok_or_else(|| bad(&dropped))?;
            self.count_dead_dropped(dropped);
        }
        batch.claimed.reserve(ids.len());
        for (id, env) in ids.into_iter().zip(envelopes) {
            let id = MessageId::from_stored(text(id).ok_or_else(|| bad(&"id"))?);
            match env {
                Value::BulkString(raw) if raw == b"corrupt" || raw == b"orphan" => {
                    let why = if raw == b"corrupt" {
                        batch.buried += 1;
                        "its envelope does not parse; moved to the dead letters"
                    } else {
                        "its envelope is missing; dropped"
                    };
                    batch.undeliverable.push((id, why.to_string()));
                }
                // Stored as it was: this delivery is one more attempt, under the claim's token.
                Value::BulkString(raw) => {
                    match Envelope::parse_owned(raw).and_then(|e| e.delivered(token)) {
                        Ok(envelope) => batch.claimed.push(Delivery { id, envelope }),
                        Err(why) => {
                            // Not `?`: the acks that rode on the claim were done, and their
                            // answers must reach the runs.
                            let buried = self
                                .invoke::<i64>(&scripts::bury(k, &id, token, &self.flow))
                                .await;
                            let done = match buried {
                                Ok(n) if n >= 1 => {
                                    batch.buried += 1;
                                    self.count_dead_dropped(n - 1);
                                    "moved to the dead letters".to_string()
                                }
                                Ok(_) => "left".to_string(),
                                Err(e) => format!(
                                    "left in flight (moving it to the dead letters failed: {e}); \
                                     it is delivered again after its ack deadline"
                                ),
                            };
                            batch.undeliverable.push((id, format!("{why}; {done}")));
                        }
                    }
                }
                other => return Err(bad(&other)),
            }
        }
        Ok(batch)
    }

    /// Acks deliveries; `true` for each that still owned its message (now deleted), `false`
    /// for a stale one (left untouched).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn ack(&self, deliveries: &[Receipt]) -> Result<Vec<bool>> {
        let k = &self.keys;
        let mut acked = Vec::with_capacity(deliveries.len());
        // The script unpacks its ids into single commands; Lua caps how many one call takes.
        for chunk in deliveries.chunks(MAX_CLAIM_BATCH) {
            let (call, order) = scripts::ack(k, chunk);
            // One character an ack: '1' acked, '0' stale (nil: an empty string over RESP2).
            let v: Option<Vec<u8>> = self.invoke(&call).await?;
            let v = v.unwrap_or_default();
            let answers = order.restore(v.iter().map(|c| *c == b'1'));
            acked.extend(answers.ok_or_else(|| Error::unexpected("ack", &v))?);
        }
        Ok(acked)
    }
}
