//! Times as the scripts keep them: whole milliseconds since the epoch, on Redis' clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch as a `SystemTime`.
pub fn ms_to_time(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// A `SystemTime` as milliseconds since the epoch (0 for times before it).
pub fn time_to_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, millis)
}

/// A `Duration` in whole milliseconds, saturating at `u64::MAX` (the one place delayq turns a
/// `Duration` into script milliseconds).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The latest due time delayq stores: the last millisecond of year 9999. Scores and envelope
/// fields are exact integers well past it, and a date beyond it is a bug, not a plan.
pub const MAX_DUE_MS: u64 = 253_402_300_799_999;
