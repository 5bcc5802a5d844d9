//! What a send can say: when, which id, replace or keep, attempts; and what calls report.

use std::time::{Duration, SystemTime};

use super::scripts::Due;
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::time::{millis, time_to_ms, MAX_DUE_MS};

/// When a message becomes due.
#[derive(Debug, Clone, Copy)]
pub(crate) enum When {
    Delay(Duration),
    At(SystemTime),
}

impl When {
    /// The due time as the scripts take it; one past [`MAX_DUE_MS`] is refused before
    /// anything is written (for a delay, judged by this machine's clock: the limit is
    /// thousands of years away, so the clocks' skew does not matter).
    pub(crate) fn due(self) -> Result<Due> {
        let (due, at_ms) = match self {
            When::Delay(d) => {
                let ms = millis(d);
                (
                    Due::InMs(ms),
                    u128::from(time_to_ms(SystemTime::now())) + u128::from(ms),
                )
            }
            When::At(t) => {
                let ms = time_to_ms(t);
                (Due::AtMs(ms), u128::from(ms))
            }
        };
        if at_ms > u128::from(MAX_DUE_MS) {
            return Err(Error::DueTooFar {
                requested_ms: at_ms,
                limit_ms: MAX_DUE_MS,
            });
        }
        Ok(due)
    }
}

/// Options for [`Producer::send_with`](crate::Producer::send_with).
///
/// ```
/// use std::time::Duration;
/// use delayq_core::SendOptions;
/// let opts = SendOptions::new().delay(Duration::from_secs(30)).id("order-7").max_attempts(3);
/// ```
#[derive(Debug, Clone)]
pub struct SendOptions {
    pub(crate) when: When,
    pub(crate) id: Option<String>,
    pub(crate) replace: bool,
    /// Set by `debounce`, which needs a user id.
    pub(crate) debounce: bool,
    /// Set by `dedup_for`, which needs a user id: how long the id stays reserved.
    pub(crate) dedup_for: Option<Duration>,
    pub(crate) priority: Priority,
    pub(crate) key: Option<String>,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) replicas: u32,
    pub(crate) replica_timeout: Duration,
    /// The id is one delayq made (a flow step's, with a unit separator no user id may hold):
    /// used as it is.
    pub(crate) trusted_id: bool,
}

/// The longest message key ([`SendOptions::key`]), in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// How long [`SendOptions::replicas`] waits by default.
pub const DEFAULT_REPLICA_TIMEOUT: Duration = Duration::from_secs(1);

impl Default for SendOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl SendOptions {
    /// Due now, a generated id, the listener's max_attempts.
    pub fn new() -> Self {
        SendOptions {
            when: When::Delay(Duration::ZERO),
            id: None,
            replace: false,
            debounce: false,
            dedup_for: None,
            priority: Priority::Normal,
            key: None,
            max_attempts: None,
            replicas: 0,
            replica_timeout: DEFAULT_REPLICA_TIMEOUT,
            trusted_id: false,
        }
    }

    /// Due `delay` after Redis receives it.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.when = When::Delay(delay);
        self
    }

    /// Due at `at` (compared with the Redis server's clock).
    pub fn at(mut self, at: SystemTime) -> Self {
        self.when = When::At(at);
        self
    }

    /// Your own id. Sending the same id again while that message is pending is a no-op
    /// ([`SendOutcome::Duplicate`]) unless [`replace`](Self::replace) is set.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// With a user id: replace a pending (delayed) message with that id, new payload and due
    /// time, fresh attempt count. A message in flight is never replaced (`Duplicate`).
    pub fn replace(mut self, replace: bool) -> Self {
        self.replace = replace;
        self
    }

    /// With a user id: the last of a burst of sends wins. A pending (delayed) message with
    /// this id takes the new payload and is due `window` from now, so it runs once, `window`
    /// after the burst's last send ([`SendOutcome::Replaced`]); with none pending, one is
    /// created due then. A message with the id in flight is not touched (`Duplicate`): its
    /// handler already has a payload. The same as `.replace(true).delay(window)`.
    pub fn debounce(mut self, window: Duration) -> Self {
        self.replace = true;
        self.debounce = true;
        self.when = When::Delay(window);
        self
    }

    /// With a user id: once this message finished (acknowledged, or moved to the dead
    /// letters), its id stays reserved for `window`: a send with the id in that time returns
    /// [`SendOutcome::Duplicate`] and changes nothing, whether or not it asks to
    /// [`replace`](Self::replace). While the message is pending or in flight, sends with its id
    /// behave as they always do. A cancel leaves no reservation; a resend after the window
    /// starts afresh. Windows past the year 9999 are cut there.
    pub fn dedup_for(mut self, window: Duration) -> Self {
        self.dedup_for = Some(window);
        self
    }

    /// Among the topic's due messages, higher priority is claimed first; within one
    /// priority, the earliest due first. Never early: a message waits for its due time
    /// whatever its priority. [`Priority::Low`], [`Normal`](Priority::Normal) (the default),
    /// [`High`](Priority::High), or any level as a `u8` (`.priority(200)`), higher first.
    ///
    /// A topic that never sees a priority other than the default claims as before; the first
    /// message with one makes its claims order due messages by priority from then on.
    pub fn priority(mut self, priority: impl Into<Priority>) -> Self {
        self.priority = priority.into();
        self
    }

    /// The message's key, for a listener's `rate_per_key`: the messages of one key share its
    /// limit, and a key held back never holds up the other keys' due messages. Messages
    /// without a key share one (as do those with an empty one). At most
    /// [`MAX_KEY_LEN`] bytes.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// `max_attempts` as `send.lua` takes it (0: the listener's default).
    pub(crate) fn attempts_arg(&self) -> crate::Result<u32> {
        match self.max_attempts {
            Some(0) => Err(crate::Error::InvalidOption {
                option: "max_attempts",
                reason: "must be at least 1 (it counts the first run)".into(),
            }),
            Some(n) => Ok(n),
            None => Ok(0),
        }
    }

    /// The `dedup_for` window in ms as `send.lua` takes it (0 for none).
    pub(crate) fn dedup_ms(&self) -> u64 {
        self.dedup_for.map_or(0, |w| millis(w).min(MAX_DUE_MS))
    }

    /// A debounce or a dedup window needs an id.
    pub(crate) fn check_id_options(&self) -> crate::Result<()> {
        if self.debounce && self.id.is_none() {
            return Err(crate::Error::InvalidOption {
                option: "debounce",
                reason: "needs an id: the sends it merges are the ones with the same id \
                         (SendOptions::new().id(\"doc-7\").debounce(window))"
                    .into(),
            });
        }
        if self.key.as_ref().is_some_and(|k| k.len() > MAX_KEY_LEN) {
            return Err(crate::Error::InvalidOption {
                option: "key",
                reason: format!("is longer than {MAX_KEY_LEN} bytes"),
            });
        }
        if self.dedup_for.is_some() && self.id.is_none() {
            return Err(crate::Error::InvalidOption {
                option: "dedup_for",
                reason: "needs an id: the window reserves that id \
                         (SendOptions::new().id(\"invoice-7\").dedup_for(window))"
                    .into(),
            });
        }
        Ok(())
    }

    /// Returns only once `n` replicas hold the write (Redis `WAIT`, on the connection to the
    /// primary that took it), within [`replica_timeout`](Self::replica_timeout); otherwise
    /// [`Error::NotReplicated`](crate::Error::NotReplicated). Without it, a failover can
    /// lose the last writes the old primary had not yet copied to a replica.
    pub fn replicas(mut self, n: u32) -> Self {
        self.replicas = n;
        self
    }

    /// How long [`replicas`](Self::replicas) waits (default 1 s), counted from the start of
    /// the send. Such sends write and wait on a connection of their own (one per primary on
    /// a cluster), and the sends that wrote meanwhile share one `WAIT`; a write may first wait
    /// behind the `WAIT` before it, so a send returns within about twice this (plus its round
    /// trips), never holding up any other command of the producer.
    pub fn replica_timeout(mut self, timeout: Duration) -> Self {
        self.replica_timeout = timeout;
        self
    }

    /// Handler runs allowed for this message, overriding the listener's `max_attempts`.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }
}

/// A message's priority ([`SendOptions::priority`]): among due messages, the higher is
/// claimed first. `Low`, `Normal` and `High` are the levels 64, 128 and 192 of 0-255; a `u8`
/// converts into its own level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    /// Level 64: after every `Normal` message that is due.
    Low,
    /// Level 128, what a message without a priority has.
    #[default]
    Normal,
    /// Level 192: before every `Normal` message that is due.
    High,
    /// Any level, 0-255, higher first.
    Level(u8),
}

impl Priority {
    /// The level, 0-255.
    pub fn level(self) -> u8 {
        match self {
            Priority::Low => 64,
            Priority::Normal => 128,
            Priority::High => 192,
            Priority::Level(n) => n,
        }
    }
}

impl From<u8> for Priority {
    fn from(level: u8) -> Self {
        Priority::Level(level)
    }
}

impl PartialOrd for Priority {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Priority {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.level().cmp(&other.level())
    }
}

/// What [`Producer::send_with`](crate::Producer::send_with) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// A new message.
    Created(MessageId),
    /// A message with this id is already pending or in flight; nothing changed.
    Duplicate(MessageId),
    /// The pending message with this id was replaced.
    Replaced(MessageId),
}

impl SendOutcome {
    /// The message id.
    pub fn id(&self) -> &MessageId {
        match self {
            SendOutcome::Created(id) | SendOutcome::Duplicate(id) | SendOutcome::Replaced(id) => id,
        }
    }
}

/// What [`Producer::cancel`](crate::Producer::cancel) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// It was pending and is gone; it will not be delivered.
    Removed,
    /// Unknown, already done, or dead (dead letters go through `purge_dead`).
    NotFound,
    /// A consumer is handling it right now; it is not stopped.
    InFlight,
}

/// How many messages of a topic are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopicCounts {
    /// Waiting for their due time (or due and not yet claimed).
    pub delayed: usize,
    /// Claimed by a consumer, not yet acknowledged.
    pub inflight: usize,
    /// In the dead letters.
    pub dead: usize,
}
