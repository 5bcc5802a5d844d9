//! Redis Streams consumer groups: a stream's keys, and the calls one consumer of a group
//! makes. Every state change beyond a plain read is one script (`scripts/stream/*.lua`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::{ScriptInvocation, Value};

use super::keys::StreamKeys;
use super::reply::{read_entries, StreamEntry};
use crate::connection::RedisConn;
use crate::error::Result;
use crate::names::validate_name;
use crate::script::scripts;
use crate::time::millis;
use delayq_spec::defaults::{DEAD_MAX, DEAD_TTL_MS};

scripts!(
    StreamScripts,
    STREAM_SCRIPTS,
    "stream/",
    include_str!("../scripts/stream/prelude.lua"),
    [hold, dead, take_over, leave, replay_dead]
);

/// One consumer of a group on a stream.
#[derive(Clone)]
pub struct StreamGroup {
    pub(super) conn: RedisConn,
    pub(super) keys: Arc<StreamKeys>,
    pub(super) consumer: Arc<str>,
    /// Dead letters kept at most, and for how long (ms), in the stream's dead-letter stream.
    pub(super) dead_bounds: (u32, u64),
    /// Dead letters the calls dropped past the bounds, not yet taken; shared by the clones.
    pub(super) dead_dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for StreamGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamGroup")
            .field("keys", &self.keys)
            .field("consumer", &self.consumer)
            .finish()
    }
}

impl StreamGroup {
    /// The consumer `consumer` of `group` on `stream`, over `conn`.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a malformed stream or group name.
    pub fn new(conn: RedisConn, stream: &str, group: &str, consumer: &str) -> Result<Self> {
        validate_name("consumer", consumer)?;
        Ok(StreamGroup {
            conn,
            keys: Arc::new(StreamKeys::new(stream, group)?),
            consumer: consumer.into(),
            dead_bounds: (DEAD_MAX, DEAD_TTL_MS),
            dead_dropped: Arc::default(),
        })
    }

    /// The same consumer, keeping the stream's dead letters to `max` entries, each for
    /// `ttl_ms` (the default: 10,000 for 30 days); the oldest go first. The dead-letter
    /// stream is the stream's, so each group's calls trim it to that group's bounds.
    pub fn with_dead_bounds(mut self, max: u32, ttl_ms: u64) -> Self {
        self.dead_bounds = (max, ttl_ms);
        self
    }

    /// Dead letters dropped past the bounds by this consumer's calls (any clone) since the
    /// last call of this.
    pub fn take_dead_dropped(&self) -> u64 {
        self.dead_dropped.swap(0, Ordering::Relaxed)
    }

    /// The keys.
    pub fn keys(&self) -> &StreamKeys {
        &self.keys
    }

    /// This consumer's name.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    pub(super) fn script(&self, script: &'static redis::Script) -> ScriptInvocation<'static> {
        let mut inv = script.key(&self.keys.stream);
        inv.key(&self.keys.dead)
            .key(&self.keys.alive)
            .key(&self.keys.dead_bounds)
            .arg(&self.keys.group)
            .arg(&*self.consumer);
        inv
    }

    pub(super) async fn invoke<T: redis::FromRedisValue>(
        &self,
        inv: ScriptInvocation<'static>,
    ) -> Result<T> {
        self.conn.run_script(inv).await
    }

    /// Creates the group (and the stream, if missing) reading from the end (`$`), or from the
    /// first entry when `from_start`. `Ok(false)` when the group exists already.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn create(&self, from_start: bool) -> Result<bool> {
        let mut cmd = redis::cmd("XGROUP");
        cmd.arg("CREATE")
            .arg(&self.keys.stream)
            .arg(&self.keys.group)
            .arg(if from_start { "0" } else { "$" })
            .arg("MKSTREAM");
        let reply: redis::RedisResult<()> = self
            .conn
            .run(|mut c| async move { cmd.query_async(&mut c).await })
            .await;
        match reply {
            Ok(()) => Ok(true),
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// New entries for this consumer (`XREADGROUP … >`), at most `count`, waiting up to
    /// `block` for the first. Runs on `reader`, a connection of its own
    /// ([`RedisConn::for_blocking`]).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn read(
        &self,
        reader: &RedisConn,
        count: usize,
        block: Duration,
    ) -> Result<Vec<StreamEntry>> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(&self.keys.group)
            .arg(&*self.consumer)
            .arg("COUNT")
            .arg(count.max(1))
            .arg("BLOCK")
            .arg(millis(block.min(reader.max_block())))
            .arg("STREAMS")
            .arg(&self.keys.stream)
            .arg(">");
        let reply: Value = reader
            .run(|mut c| async move { cmd.query_async(&mut c).await })
            .await?;
        read_entries(reply)
    }

    /// Acks handled entries with one `XACK`. Per id `true`: a stream ack is not fenced by
    /// the holder (an entry taken over by another consumer is still acked by the first: it
    /// was handled), and an id that was no longer pending (acked already, or dead-lettered)
    /// is acked all the same. One `XACK` for the batch costs Redis about 0.2 µs an entry; a
    /// per-id answer (a script, one `XACK` each) cost 1.5 µs, more than the read itself.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn ack(&self, ids: &[impl AsRef<str>]) -> Result<Vec<bool>> {
        let mut cmd = redis::cmd("XACK");
        cmd.arg(&self.keys.stream).arg(&self.keys.group);
        for id in ids {
            cmd.arg(id.as_ref());
        }
        let acked: usize = self
            .conn
            .run(|mut c| async move { cmd.query_async(&mut c).await })
            .await?;
        if acked < ids.len() {
            tracing::debug!(
                count = ids.len() - acked,
                "acked entries that were no longer pending"
            );
        }
        Ok(vec![true; ids.len()])
    }

    async fn hold(
        &self,
        ids: &[impl AsRef<str>],
        idle: Duration,
        change: i32,
    ) -> Result<Vec<bool>> {
        let mut inv = self.script(&STREAM_SCRIPTS.hold);
        inv.arg(millis(idle)).arg(change);
        for id in ids {
            inv.arg(id.as_ref());
        }
        let held: Vec<u8> = self.invoke(inv).await?;
        Ok(held.into_iter().map(|h| h == 1).collect())
    }

    /// Resets the idle time of entries this consumer holds, so that nobody takes them over
    /// for `min_idle` from now; per id, `false` when it no longer holds it.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn renew(&self, ids: &[impl AsRef<str>]) -> Result<Vec<bool>> {
        self.hold(ids, Duration::ZERO, 0).await
    }

    /// Lets entry `id` be taken over (delivered again) once `backoff` has passed.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn retry_after(
        &self,
        id: &str,
        backoff: Duration,
        min_idle: Duration,
    ) -> Result<bool> {
        let idle = min_idle.saturating_sub(backoff);
        Ok(self.hold(&[id], idle, 0).await?.first() == Some(&true))
    }

    /// Not now (`Ack::retry_after`): taken over again after `after` (at most `min_idle`),
    /// with this delivery not counted. `false` when this consumer no longer holds it.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn later(&self, id: &str, after: Duration, min_idle: Duration) -> Result<bool> {
        let idle = min_idle.saturating_sub(after);
        Ok(self.hold(&[id], idle, -1).await?.first() == Some(&true))
    }

    /// Hands entries back at a clean stop: they may be taken over at once, and the delivery
    /// this consumer made does not count. How many it still held.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn hand_back(&self, ids: &[impl AsRef<str>], min_idle: Duration) -> Result<usize> {
        let held = self.hold(ids, min_idle, -1).await?;
        Ok(held.into_iter().filter(|h| *h).count())
    }

    /// Moves entry `id` to the dead-letter stream with `reason` and acks it; `false` when
    /// this consumer no longer holds it.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn dead_letter(&self, id: &str, reason: &str) -> Result<bool> {
        let mut inv = self.script(&STREAM_SCRIPTS.dead);
        inv.arg(id)
            .arg(reason)
            .arg(self.dead_bounds.0)
            .arg(self.dead_bounds.1);
        let (moved, dropped): (u8, u64) = self.invoke(inv).await?;
        self.dead_dropped.fetch_add(dropped, Ordering::Relaxed);
        Ok(moved == 1)
    }

    /// Leaves the alive set (a clean stop).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn leave(&self) -> Result<()> {
        self.invoke::<u8>(self.script(&STREAM_SCRIPTS.leave))
            .await
            .map(drop)
    }

    /// Replays dead letter `dead_id` of this group (see `replay_dead.lua`): the new entry's
    /// id, or `None` when there is no such dead letter of the group.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn replay_dead(&self, dead_id: &str) -> Result<Option<String>> {
        let mut inv = self.script(&STREAM_SCRIPTS.replay_dead);
        inv.arg(dead_id);
        self.invoke(inv).await
    }
}
