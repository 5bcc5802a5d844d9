//! Outbox senders' intents. A sender of a flow's outbox notes its intent first
//! (`ns:{flows}:sending`, a member of its own, `<flow>\x1f<token>`, scored by when it is
//! presumed dead) and drops it when the outbox is sent. A sender that dies between (a process
//! killed, Redis gone mid-page) leaves its intent behind: the back pool's sweep
//! ([`Producer::send_stranded_outboxes`]) sends the flow's outbox once it expires.
//!
//! A start notes its intent in `ns:{flows}:starting` instead: its first steps are written sent
//! and never enter the outbox (`create.lua`), so the sweep of an expired start intent sends
//! every step written sent again (`unsent.lua`), then the outbox. (A build that knows only
//! `sending` never takes a start's intent, which it would drop with its steps unsent.)

use std::time::{Duration, Instant};

use super::keys::{FlowId, SEP};
use crate::connection::RedisConn;
use crate::error::{Error, Result};
use crate::producer::Producer;

/// An intent not refreshed for this long is its sender's that died.
const INTENT_LEASE: Duration = Duration::from_secs(60);
/// A sender refreshes its intent after this long.
pub(super) const INTENT_REFRESH: Duration = Duration::from_secs(20);
/// Stranded outboxes one sweep sends at most.
const SWEEP_FLOWS: usize = 32;

/// The namespace's outbox senders' intents.
pub(crate) fn sending_key(namespace: &str) -> String {
    format!("{namespace}:{{flows}}:sending")
}

/// The namespace's starts' intents.
pub(crate) fn starting_key(namespace: &str) -> String {
    format!("{namespace}:{{flows}}:starting")
}

/// One sender's intent to send a flow's outbox (or, a start's, its first steps).
pub(super) struct Intent {
    pub(super) key: String,
    pub(super) member: String,
}

impl Intent {
    pub(super) fn new(namespace: &str, id: &FlowId) -> Self {
        Self::at(sending_key(namespace), id)
    }

    /// A start's intent (see the module's docs).
    pub(super) fn start(namespace: &str, id: &FlowId) -> Self {
        Self::at(starting_key(namespace), id)
    }

    fn at(key: String, id: &FlowId) -> Self {
        Intent {
            key,
            member: format!("{id}{SEP}{:016x}", rand_token()),
        }
    }

    /// Whether it is a start's.
    pub(super) fn is_start(&self) -> bool {
        self.key.ends_with(":{flows}:starting")
    }

    /// When it is presumed dead, noted now (this machine's clock, ms). A sweeper whose clock
    /// is ahead takes it over early: the steps are then sent twice, and the second send of
    /// each is a duplicate (the step ids are reserved).
    pub(super) fn until(&self) -> u64 {
        crate::time::time_to_ms(std::time::SystemTime::now()) + INTENT_LEASE.as_millis() as u64
    }
}

/// A random token: one sender's intent apart from another's for the same flow.
fn rand_token() -> u64 {
    let mut b = [0u8; 8];
    // Without the OS' randomness, the time: unique enough for a few senders of one flow.
    if getrandom::fill(&mut b).is_err() {
        return std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    }
    u64::from_le_bytes(b)
}

/// `err`, or, for a WRONGTYPE, [`Error::WrongType`] naming the first of `keys` (key, the type
/// delayq keeps there) that holds a value of another type.
pub(super) async fn name_foreign(
    conn: &RedisConn,
    keys: &[(&str, &'static str)],
    err: redis::RedisError,
) -> Error {
    if !matches!(err.code(), Some("WRONGTYPE")) && !err.to_string().contains("WRONGTYPE") {
        return Error::Redis(err);
    }
    crate::delay::first_foreign(conn, keys)
        .await
        .unwrap_or(Error::Redis(err))
}

impl Producer {
    /// Notes `intent` (or pushes its expiry out).
    pub(super) async fn note_intent(&self, intent: &Intent) -> Result<()> {
        self.intent_command(intent, Some(intent.until())).await
    }

    /// Drops `intent`: its sender is done.
    pub(super) async fn drop_intent(&self, intent: &Intent) -> Result<()> {
        self.intent_command(intent, None).await
    }

    /// Pushes `intent`'s expiry out when it was noted long enough ago.
    pub(super) async fn refresh_intent(&self, intent: &Intent, noted: &mut Instant) -> Result<()> {
        if noted.elapsed() >= INTENT_REFRESH {
            self.note_intent(intent).await?;
            *noted = Instant::now();
        }
        Ok(())
    }

    /// `ZADD key score member` (a score given) or `ZREM key member`.
    async fn intent_command(&self, intent: &Intent, score: Option<u64>) -> Result<()> {
        let result = self
            .conn
            .run(|mut c| async move {
                let mut cmd = redis::cmd(if score.is_some() { "ZADD" } else { "ZREM" });
                cmd.arg(&intent.key);
                if let Some(s) = score {
                    cmd.arg(s);
                }
                cmd.arg(&intent.member).query_async::<()>(&mut c).await
            })
            .await;
        match result {
            Ok(()) => Ok(()),
            Err(e) => Err(name_foreign(&self.conn, &[(&intent.key, "zset")], e).await),
        }
    }

    /// Sends the outboxes of flows whose senders died before they finished (their intents
    /// expired), and the first steps of starts that died so; returns how many it sent, at
    /// most 32 of each a call. A flow that is gone, or whose outbox is empty, only loses its
    /// intent. One that fails (Redis refuses its flow's calls: a hand-edited key) keeps its
    /// intent, pushed a minute out, and is logged; the others go on.
    ///
    /// # Errors
    /// [`Error::Redis`] when Redis does not answer or refuses the read of the intents, or
    /// [`Error::WrongType`] when their key holds another type.
    pub async fn send_stranded_outboxes(&self) -> Result<usize> {
        let mut sent = 0;
        for key in [
            starting_key(self.namespace()),
            sending_key(self.namespace()),
        ] {
            sent += self.send_stranded(key).await?;
        }
        Ok(sent)
    }

    /// `send_stranded_outboxes` for the intents at `key`.
    async fn send_stranded(&self, key: String) -> Result<usize> {
        let now = crate::time::time_to_ms(std::time::SystemTime::now());
        let expired: std::result::Result<Vec<String>, redis::RedisError> = self
            .conn
            .run(|mut c| {
                let key = &key;
                async move {
                    redis::cmd("ZRANGE")
                        .arg(key)
                        .arg("-inf")
                        .arg(now)
                        .arg("BYSCORE")
                        .arg("LIMIT")
                        .arg(0)
                        .arg(SWEEP_FLOWS)
                        .query_async(&mut c)
                        .await
                }
            })
            .await;
        let expired = match expired {
            Ok(list) => list,
            Err(e) => return Err(name_foreign(&self.conn, &[(&key, "zset")], e).await),
        };
        let mut sent = 0;
        for member in expired {
            let intent = Intent {
                key: key.clone(),
                member,
            };
            // A member that is not "<flow>\x1f<token>" (written by hand) is dropped.
            let Some(flow) = intent
                .member
                .split_once(SEP)
                .and_then(|(flow, _)| FlowId::new(flow).ok())
            else {
                tracing::warn!(key = %key, member = %intent.member, "dropped an outbox intent that names no flow");
                self.drop_intent(&intent).await?;
                continue;
            };
            // Taken over (pushed out first, so that a failure leaves it for a later sweep,
            // behind the others), sent, then dropped.
            self.note_intent(&intent).await?;
            let send = async {
                let ttl = self.flow_ttl(&flow).await?;
                self.send_noted(&flow, ttl, &intent, Vec::new()).await
            };
            match send.await {
                Ok(_) => sent += 1,
                Err(e) => {
                    tracing::warn!(flow = %flow, error = %e, "a stranded flow outbox could not be sent; a later sweep tries again")
                }
            }
        }
        Ok(sent)
    }
}

impl crate::delay::TopicQueue {
    /// The namespace's stranded flow outboxes sent (see
    /// [`Producer::send_stranded_outboxes`]).
    ///
    /// # Errors
    /// As [`Producer::send_stranded_outboxes`].
    pub async fn send_stranded_outboxes(&self) -> Result<usize> {
        self.producer().send_stranded_outboxes().await
    }
}
