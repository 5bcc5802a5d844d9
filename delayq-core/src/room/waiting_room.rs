//! [`WaitingRoom`]: entering, a token's status, touching, leaving and counts.

use std::time::Duration;

use redis::{ScriptInvocation, Value};

use super::config::RoomConfig;
use crate::catalog::Registered;
use crate::error::{Error, Result};
use crate::names::validate_name;
use crate::producer::Producer;
use crate::script::scripts;
use crate::time::millis;

scripts!(
    RoomScripts,
    ROOM_SCRIPTS,
    "room/",
    include_str!("../scripts/room/prelude.lua"),
    [enter, status, touch, leave, counts, admit]
);

/// Waiting tokens a tick expires at most, the rest in the next ticks (expiring one is a
/// sorted-set deletion in the line, the costly part of a sweep).
pub(super) const SWEEP_PER_TICK: usize = 1_000;
/// Bytes of randomness in a token.
const TOKEN_BYTES: usize = 16;

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

/// A waiting room on Redis. Cheap to clone.
#[derive(Clone)]
pub struct WaitingRoom {
    /// Its connection, namespace, and the registry entry `enter` adds once.
    pub(super) producer: Producer,
    pub(super) name: std::sync::Arc<str>,
    pub(super) keys: std::sync::Arc<[String; 9]>,
    pub(super) config: RoomConfig,
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

pub(super) fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

impl WaitingRoom {
    /// Room `name` over `producer`'s connection and namespace.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a malformed name;
    /// [`Error::InvalidOption`](crate::Error::InvalidOption) for a config out of range.
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
    ///
    /// # Errors
    /// As [`Producer::connect_from_env`](crate::Producer::connect_from_env) and
    /// [`new`](Self::new).
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

    pub(super) fn script(&self, script: &'static redis::Script) -> ScriptInvocation<'static> {
        let mut inv = script.prepare_invoke();
        for k in self.keys.iter() {
            inv.key(k);
        }
        inv
    }

    pub(super) async fn invoke<T: redis::FromRedisValue>(
        &self,
        inv: ScriptInvocation<'static>,
    ) -> Result<T> {
        self.producer.conn.run_script(inv).await
    }

    /// Joins the line: a new unguessable token (128 random bits, 32 hex digits).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
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
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call; a
    /// malformed token is `Ok(RoomStatus::Unknown)`, not an error.
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
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
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
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn leave(&self, token: &str) -> Result<bool> {
        self.remove(token, "leave").await
    }

    /// Ends an admission at once, freeing its slot for the next tick (capacity mode);
    /// `false` when the token was not active.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
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
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn counts(&self) -> Result<RoomCounts> {
        let (waiting, active): (u64, u64) = self.invoke(self.script(&ROOM_SCRIPTS.counts)).await?;
        Ok(RoomCounts { waiting, active })
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
