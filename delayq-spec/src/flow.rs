//! A delay topic's flow control, as the attributes, the configuration and the claim scripts
//! all take it: the rate limit its claims keep to, and how many dead letters it keeps, for how
//! long.

use crate::defaults::{DEAD_MAX, DEAD_TTL_MS, RESULTS_MAX, RESULT_TTL_MS};
use crate::Rate;

/// Flow control of one topic, passed by the consumer with each claim and each settle (every
/// process running the topic's listener enforces the same limits, in the scripts, so they
/// hold across processes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// Handler starts allowed per period for the whole topic, if limited.
    pub rate: Option<Rate>,
    /// Handler starts allowed per period for each message key (`SendOptions::key`; messages
    /// without one share a key), if limited; its burst is the rate's default.
    pub rate_per_key: Option<Rate>,
    /// Dead letters kept at most: past it the oldest are dropped.
    pub dead_max: u32,
    /// How long a dead letter is kept (ms).
    pub dead_ttl_ms: u64,
    /// How long a handler's result (or a cancelled outcome) is kept (ms): `result_ttl`.
    pub result_ttl_ms: u64,
    /// Results kept at most: past it the oldest are dropped (`results_max`).
    pub results_max: u32,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            rate: None,
            rate_per_key: None,
            dead_max: DEAD_MAX,
            dead_ttl_ms: DEAD_TTL_MS,
            result_ttl_ms: RESULT_TTL_MS,
            results_max: RESULTS_MAX,
        }
    }
}
