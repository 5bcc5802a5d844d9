//! The waiting room: an admission queue for traffic peaks. People get a token and wait in
//! line; each tick admits the earliest arrivals, in one script, at a fixed rate or up to a
//! capacity. Every key of a room shares the hash tag `{room:<name>}`.

use std::time::Duration;

use redis::{ScriptInvocation, Value};

use crate::envelope::millis;
use crate::error::{Error, Result};
use crate::keys::{validate_name, Registered};
use crate::leader::{LeaderLease, Leadership};
use crate::producer::Producer;
use crate::scripts::scripts;

scripts!(
    RoomScripts,
    ROOM_SCRIPTS,
    "room/",
    include_str!("scripts/room/prelude.lua"),
    [enter, status, touch, leave, counts, admit]
);

/// Waiting tokens a tick expires at most, the rest in the next ticks (expiring one is a
/// sorted-set deletion in the line, the costly part of a sweep).
const SWEEP_PER_TICK: usize = 1_000;
/// Bytes of randomness in a token.
const TOKEN_BYTES: usize = 16;

/// How a room admits. Defaults: 100 a tick, a tick a second, no capacity (a fixed rate),
/// waiting tokens expire 1 h after their last `touch`, admissions after 30 min.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoomConfig {
    admit_per_tick: u32,
    tick: Duration,
    capacity: Option<u32>,
    waiting_ttl: Duration,
    active_ttl: Duration,
}

impl Default for RoomConfig {
    fn default() -> Self {
        RoomConfig::fixed(100, 1_000)
    }
}

impl RoomConfig {
    /// A fixed rate: `admit_per_tick` every `tick_ms`, the other settings default (usable in
    /// a `const`).
    pub const fn fixed(admit_per_tick: u32, tick_ms: u64) -> Self {
        RoomConfig {
            admit_per_tick,
            tick: Duration::from_millis(tick_ms),
            capacity: None,
            waiting_ttl: Duration::from_secs(3600),
            active_ttl: Duration::from_secs(1800),
        }
    }

    /// The most tokens one tick admits.
    pub fn admit_per_tick(mut self, n: u32) -> Self {
        self.admit_per_tick = n;
        self
    }

    /// How often the runtime ticks the room.
    pub fn tick(mut self, every: Duration) -> Self {
        self.tick = every;
        self
    }

    /// `Some(n)`: admit only while fewer than `n` are active (a `complete` frees a slot for
    /// the next tick); `None`: a fixed rate.
    pub fn capacity(mut self, n: Option<u32>) -> Self {
        self.capacity = n;
        self
    }

    /// A waiting token not touched for this long expires.
    pub fn waiting_ttl(mut self, ttl: Duration) -> Self {
        self.waiting_ttl = ttl;
        self
    }

    /// An admission lasts this long (unless completed before).
    pub fn active_ttl(mut self, ttl: Duration) -> Self {
        self.active_ttl = ttl;
        self
    }

    /// The tick interval.
    pub fn tick_every(&self) -> Duration {
        self.tick
    }

    fn check(&self) -> Result<()> {
        let bad = |option: &'static str, reason: &str| {
            Err(Error::InvalidOption {
                option,
                reason: reason.to_string(),
            })
        };
        if self.admit_per_tick == 0 {
            return bad("admit_per_tick", "it must be at least 1");
        }
        if self.capacity == Some(0) {
            return bad(
                "capacity",
                "it must be at least 1 (or None for a fixed rate)",
            );
        }
        if self.tick < Duration::from_millis(10) {
            return bad("tick", "it must be at least 10 ms");
        }
        if self.waiting_ttl < Duration::from_secs(1) || self.active_ttl < Duration::from_secs(1) {
            return bad("waiting_ttl / active_ttl", "they must be at least 1 s");
        }
        Ok(())
    }
}

/// Where a token stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoomStatus {
    /// In line.
    Waiting {
        /// 1-based place in line.
        position: u64,
        /// How many are ahead (`position - 1`).
        ahead: u64,
        /// When it should be admitted, from the admission rate over the last minute of ticks;
        /// `None` until a tick has run.
        eta: Option<Duration>,
    },
    /// Admitted: let them in.
    Active {
        /// How long the admission lasts.
        expires_in: Duration,
    },
    /// Never entered, left, completed, expired, or not a token at all.
    Unknown,
}

/// How many wait and how many are inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RoomCounts {
    /// Tokens in line.
    pub waiting: u64,
    /// Tokens admitted and not expired or completed.
    pub active: u64,
}

/// What one tick did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TickReport {
    /// Tokens admitted.
    pub admitted: usize,
    /// Waiting tokens expired (untouched for `waiting_ttl`).
    pub expired_waiting: usize,
    /// Admissions expired.
    pub expired_active: usize,
}

/// A waiting room on Redis. Cheap to clone.
#[derive(Clone)]
pub struct WaitingRoom {
    /// Its connection, namespace, and the registry entry `enter` adds once.
    producer: Producer,
    name: std::sync::Arc<str>,
    keys: std::sync::Arc<[String; 9]>,
    config: RoomConfig,
}

impl std::fmt::Debug for WaitingRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoom")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish()
    }
}

/// A token is 32 lowercase hex digits; anything else is not one of ours.
fn well_formed(token: &str) -> bool {
    token.len() == TOKEN_BYTES * 2
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn new_token() -> Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| Error::Config(format!("no OS randomness: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

impl WaitingRoom {
    /// Room `name` over `producer`'s connection and namespace.
    pub fn new(producer: &Producer, name: &str, config: RoomConfig) -> Result<Self> {
        validate_name("room", name)?;
        config.check()?;
        let ns = producer.namespace();
        let key = |suffix: &str| format!("{ns}:{{room:{name}}}:{suffix}");
        Ok(WaitingRoom {
            producer: producer.clone(),
            name: name.into(),
            keys: std::sync::Arc::new([
                key("line"),
                key("touched"),
                key("ticks"),
                key("seq"),
                key("admits"),
                key("lease"),
                key("rate"),
                key("admitted"),
                key("inside"),
            ]),
            config,
        })
    }

    /// Room `name` on the Redis of `DELAYQ_REDIS_URL` under `DELAYQ_NAMESPACE`.
    pub async fn connect_from_env(name: &str, config: RoomConfig) -> Result<Self> {
        Self::new(&Producer::connect_from_env().await?, name, config)
    }

    /// The room's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its configuration.
    pub fn config(&self) -> &RoomConfig {
        &self.config
    }

    fn script(&self, script: &'static redis::Script) -> ScriptInvocation<'static> {
        let mut inv = script.prepare_invoke();
        for k in self.keys.iter() {
            inv.key(k);
        }
        inv
    }

    async fn invoke<T: redis::FromRedisValue>(&self, inv: ScriptInvocation<'static>) -> Result<T> {
        self.producer.conn.run_script(inv).await
    }

    /// Joins the line: a new unguessable token (128 random bits, 32 hex digits).
    pub async fn enter(&self) -> Result<String> {
        let token = new_token()?;
        self.register().await?;
        let mut inv = self.script(&ROOM_SCRIPTS.enter);
        inv.arg(&token);
        let _position: u64 = self.invoke(inv).await?;
        Ok(token)
    }

    /// Where `token` stands. A malformed or unknown token is [`RoomStatus::Unknown`], never
    /// an error.
    pub async fn status(&self, token: &str) -> Result<RoomStatus> {
        if !well_formed(token) {
            return Ok(RoomStatus::Unknown);
        }
        let mut inv = self.script(&ROOM_SCRIPTS.status);
        inv.arg(token).arg(millis(self.config.waiting_ttl));
        let reply: Vec<Value> = self.invoke(inv).await?;
        let bad = || Error::unexpected("room status", &reply);
        let kind = match reply.first() {
            Some(Value::BulkString(b)) => b.as_slice(),
            _ => return Err(bad()),
        };
        let at = |i: usize| reply.get(i).and_then(int).ok_or_else(bad);
        Ok(match kind {
            b"waiting" => {
                let eta = at(3)?;
                RoomStatus::Waiting {
                    position: at(1)? as u64,
                    ahead: at(2)? as u64,
                    eta: (eta >= 0).then(|| Duration::from_millis(eta as u64)),
                }
            }
            b"active" => RoomStatus::Active {
                expires_in: Duration::from_millis(at(1)?.max(0) as u64),
            },
            _ => RoomStatus::Unknown,
        })
    }

    /// Keeps a waiting token from expiring for another `waiting_ttl`; `false` when it is not
    /// waiting.
    pub async fn touch(&self, token: &str) -> Result<bool> {
        if !well_formed(token) {
            return Ok(false);
        }
        let mut inv = self.script(&ROOM_SCRIPTS.touch);
        inv.arg(token).arg(millis(self.config.waiting_ttl));
        Ok(self.invoke::<u8>(inv).await? == 1)
    }

    async fn remove(&self, token: &str, how: &str) -> Result<bool> {
        if !well_formed(token) {
            return Ok(false);
        }
        let mut inv = self.script(&ROOM_SCRIPTS.leave);
        inv.arg(token).arg(how).arg(millis(self.config.waiting_ttl));
        Ok(self.invoke::<u8>(inv).await? == 1)
    }

    /// Leaves the line (or gives up an admission); `false` when the token was in neither.
    pub async fn leave(&self, token: &str) -> Result<bool> {
        self.remove(token, "leave").await
    }

    /// Ends an admission at once, freeing its slot for the next tick (capacity mode);
    /// `false` when the token was not active.
    pub async fn complete(&self, token: &str) -> Result<bool> {
        self.remove(token, "complete").await
    }

    /// Adds the room to the namespace's registry (`delayq rooms`); `enter` and the runtime
    /// that ticks it do this.
    #[doc(hidden)]
    pub async fn register(&self) -> Result<()> {
        self.producer.register(Registered::Room, &self.name).await
    }

    /// How many wait and how many are inside.
    pub async fn counts(&self) -> Result<RoomCounts> {
        let (waiting, active): (u64, u64) = self.invoke(self.script(&ROOM_SCRIPTS.counts)).await?;
        Ok(RoomCounts { waiting, active })
    }

    fn admit_call(&self, lease_value: &str) -> ScriptInvocation<'static> {
        let mut inv = self.script(&ROOM_SCRIPTS.admit);
        inv.arg(self.config.admit_per_tick)
            .arg(self.config.capacity.unwrap_or(0))
            .arg(millis(self.config.active_ttl))
            .arg(millis(self.config.waiting_ttl))
            // Touch records looked at: the admitted tokens' go at the rate they come.
            .arg(SWEEP_PER_TICK.max(2 * self.config.admit_per_tick as usize))
            .arg(lease_value)
            .arg(SWEEP_PER_TICK);
        inv
    }

    fn report(reply: Vec<usize>) -> Result<TickReport> {
        match reply[..] {
            [admitted, expired_waiting, expired_active] => Ok(TickReport {
                admitted,
                expired_waiting,
                expired_active,
            }),
            _ => Err(Error::unexpected("room admit", &reply)),
        }
    }

    /// One tick, run by hand: how many it admitted. The runtime ticks rooms named with
    /// `Runtime::builder().waiting_room(..)` under a lease, so that several processes never
    /// over-admit; calling this besides such a runtime admits more.
    pub async fn admit(&self) -> Result<usize> {
        let reply: Vec<usize> = self.invoke(self.admit_call("")).await?;
        Ok(Self::report(reply)?.admitted)
    }

    /// The lease under which one process at a time ticks the room (its key shares the room's
    /// slot, so that a tick can check it).
    #[doc(hidden)]
    pub fn lease(&self, ttl: Duration) -> Result<LeaderLease> {
        LeaderLease::with_key(
            self.producer.conn.clone(),
            &self.name,
            self.keys[5].clone(),
            ttl,
        )
    }

    /// One tick fenced by `leadership`: `None` when it no longer holds the room's lease (a
    /// stale ticker, refused without admitting).
    #[doc(hidden)]
    pub async fn admit_as(&self, leadership: &Leadership) -> Result<Option<TickReport>> {
        let reply: Option<Vec<usize>> = self
            .invoke(self.admit_call(leadership.lease_value()))
            .await?;
        reply.map(Self::report).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_128_random_bits_in_hex() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_ne!(a, b);
        assert!(well_formed(&a), "{a}");
        for bad in ["", "xyz", &a.to_uppercase(), &a[1..], "../../etc/passwd"] {
            assert!(!well_formed(bad), "{bad}");
        }
    }
}
