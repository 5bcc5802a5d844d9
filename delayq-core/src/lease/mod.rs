//! The leader lease: one holder at a time per name in a namespace, with a fencing token that
//! grows with every new holder (`scripts/lease/*.lua`). A shared part: leader tasks run under
//! it, and the runtime ticks waiting rooms (and schedules) under one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::connection::RedisConn;
use crate::error::{Error, Result};
use crate::names::validate_name;
use crate::producer::Producer;
use crate::script::scripts;
use crate::time::millis;

scripts!(
    LeaderScripts,
    LEADER_SCRIPTS,
    "lease/",
    "",
    [acquire, renew, release]
);

/// The shortest lease: renewal runs every third of it, over a network round trip.
const MIN_TTL: Duration = Duration::from_millis(delayq_spec::defaults::MIN_LEADER_TTL_MS);

struct Keys {
    /// STRING `"<owner> <token>"` with the lease's TTL.
    lease: String,
    /// The fencing counter (`INCR` only).
    fence: String,
}

/// A lease on `name`: at most one holder at a time among every process of the namespace.
/// Acquired with `SET NX PX`, renewed by compare-and-`PEXPIRE`, released by compare-and-`DEL`.
#[derive(Clone)]
pub struct LeaderLease {
    conn: RedisConn,
    keys: Arc<Keys>,
    name: Arc<str>,
    ttl: Duration,
    /// Unique to this lease object, so two in one process contend like two processes.
    owner: Arc<str>,
    held: Arc<Mutex<Option<Leadership>>>,
}

impl std::fmt::Debug for LeaderLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderLease")
            .field("name", &self.name)
            .field("ttl", &self.ttl)
            .field("owner", &self.owner)
            .finish()
    }
}

/// Holding the lease: what a `#[leader_task]` receives.
#[derive(Clone)]
pub struct Leadership {
    conn: RedisConn,
    keys: Arc<Keys>,
    value: Arc<str>,
    token: u64,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("lease", &self.keys.lease)
            .field("token", &self.token)
            .finish()
    }
}

impl Leadership {
    /// The fencing token: strictly greater than that of every earlier holder of the lease.
    /// Pass it to what the leader writes, so a store can refuse a stale leader's writes.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The lease's value while this leadership holds it, for scripts that check it.
    pub(crate) fn lease_value(&self) -> &str {
        &self.value
    }

    /// Whether this leadership still holds the lease (one Redis round trip). `false` also
    /// when Redis cannot be asked.
    pub async fn is_current(&self) -> bool {
        let mut cmd = redis::cmd("GET");
        cmd.arg(&self.keys.lease);
        let held: redis::RedisResult<Option<String>> = self
            .conn
            .run(|mut c| async move { cmd.query_async(&mut c).await })
            .await;
        matches!(held, Ok(Some(v)) if *v == *self.value)
    }
}

impl LeaderLease {
    /// A lease on `name` (the topic rule) under `producer`'s namespace and connection, held
    /// for `ttl` after each acquire or renew (at least 300 ms).
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a malformed name;
    /// [`Error::InvalidOption`](crate::Error::InvalidOption) for a ttl under 300 ms.
    pub fn new(producer: &Producer, name: &str, ttl: Duration) -> Result<Self> {
        validate_name("leader", name)?;
        let ns = producer.namespace();
        Self::with_key(
            producer.conn.clone(),
            name,
            format!("{ns}:{{leader:{name}}}:lease"),
            ttl,
        )
    }

    /// A lease whose key is `lease_key` (its fencing counter next to it, same hash tag): a
    /// waiting room's ticking lease lives in the room's slot, so that its ticks can check it.
    pub(crate) fn with_key(
        conn: RedisConn,
        name: &str,
        lease_key: String,
        ttl: Duration,
    ) -> Result<Self> {
        if ttl < MIN_TTL {
            return Err(Error::InvalidOption {
                option: "leader lease ttl",
                reason: format!("{ttl:?} is below the minimum of {MIN_TTL:?}"),
            });
        }
        Ok(LeaderLease {
            conn,
            keys: Arc::new(Keys {
                fence: format!("{lease_key}:fence"),
                lease: lease_key,
            }),
            name: name.into(),
            ttl,
            owner: ulid::Ulid::generate().to_string().into(),
            held: Arc::default(),
        })
    }

    /// The lease's length.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn held(&self) -> Option<Leadership> {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_held(&self, leadership: Option<Leadership>) {
        *self.held.lock().unwrap_or_else(|p| p.into_inner()) = leadership;
    }

    /// Takes the lease if nobody holds it: the leadership with a new fencing token, or
    /// `None`. While this lease object holds it, the current leadership is returned again.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn try_acquire(&self) -> Result<Option<Leadership>> {
        Ok(self.acquire_or_wait().await?.ok())
    }

    /// [`try_acquire`](Self::try_acquire), telling how long the current holder's lease has
    /// left when it fails, so that a contender can try again the moment it lapses.
    #[doc(hidden)]
    pub async fn acquire_or_wait(&self) -> Result<std::result::Result<Leadership, Duration>> {
        if let Some(held) = self.held() {
            if self.renew().await? {
                return Ok(Ok(held));
            }
        }
        let mut inv = LEADER_SCRIPTS.acquire.key(&self.keys.lease);
        inv.key(&self.keys.fence)
            .arg(&*self.owner)
            .arg(millis(self.ttl));
        let reply: i64 = self.conn.run_script(inv).await?;
        if reply <= 0 {
            return Ok(Err(Duration::from_millis(reply.unsigned_abs())));
        }
        let token = reply.unsigned_abs();
        let leadership = Leadership {
            conn: self.conn.clone(),
            keys: self.keys.clone(),
            value: format!("{} {token}", self.owner).into(),
            token,
        };
        self.set_held(Some(leadership.clone()));
        Ok(Ok(leadership))
    }

    /// The fencing token of whoever holds the lease now (this object or another), without
    /// trying to take it; `None` when nobody does.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn holder(&self) -> Result<Option<u64>> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(&self.keys.lease);
        let value: Option<String> = self
            .conn
            .run(|mut c| async move { cmd.query_async(&mut c).await })
            .await?;
        Ok(value.and_then(|v| v.rsplit(' ').next()?.parse().ok()))
    }

    /// Extends the lease by its ttl from now; `false` when it is no longer held (expired,
    /// taken by another, or never acquired).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call; a
    /// lease lost to another holder is `Ok(false)`.
    pub async fn renew(&self) -> Result<bool> {
        let Some(held) = self.held() else {
            return Ok(false);
        };
        let mut inv = LEADER_SCRIPTS.renew.key(&self.keys.lease);
        inv.arg(&*held.value).arg(millis(self.ttl));
        let renewed: u8 = self.conn.run_script(inv).await?;
        if renewed == 0 {
            self.set_held(None);
        }
        Ok(renewed == 1)
    }

    /// Gives the lease up so another can take it at once; `false` when it was not held.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn release(&self) -> Result<bool> {
        let Some(held) = self.held() else {
            return Ok(false);
        };
        self.set_held(None);
        let mut inv = LEADER_SCRIPTS.release.key(&self.keys.lease);
        inv.arg(&*held.value);
        let released: u8 = self.conn.run_script(inv).await?;
        Ok(released == 1)
    }
}
