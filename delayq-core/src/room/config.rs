//! How a room admits: [`RoomConfig`].

use std::time::Duration;

use crate::error::{Error, Result};

/// How a room admits. Defaults: 100 a tick, a tick a second, no capacity (a fixed rate),
/// waiting tokens expire 1 h after their last `touch`, admissions after 30 min.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoomConfig {
    pub(super) admit_per_tick: u32,
    pub(super) tick: Duration,
    pub(super) capacity: Option<u32>,
    pub(super) waiting_ttl: Duration,
    pub(super) active_ttl: Duration,
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

    pub(super) fn check(&self) -> Result<()> {
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
