//! Redis trouble is logged once when it starts and once when it ends, not on every retry, and
//! retried with capped exponential backoff.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::options::jittered;

const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(5);

/// Whether one component is currently failing to reach Redis.
pub(crate) struct Health {
    component: String,
    failing: AtomicBool,
}

impl Health {
    pub(crate) fn new(component: String) -> Self {
        Health {
            component,
            failing: AtomicBool::new(false),
        }
    }

    pub(crate) fn failed(&self, error: &dyn Display) {
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(component = %self.component, %error, "Redis call failed; retrying with backoff until it works again");
        } else {
            tracing::debug!(component = %self.component, %error, "Redis call failed again");
        }
    }

    pub(crate) fn ok(&self) {
        if self.failing.swap(false, Ordering::Relaxed) {
            tracing::info!(component = %self.component, "Redis calls work again; resumed");
        }
    }
}

/// Delays between retries: 100 ms doubling to 5 s, with jitter.
pub(crate) struct RetryDelay(Duration);

impl RetryDelay {
    pub(crate) fn new() -> Self {
        RetryDelay(FIRST_RETRY)
    }

    pub(crate) fn reset(&mut self) {
        self.0 = FIRST_RETRY;
    }

    pub(crate) fn next_delay(&mut self) -> Duration {
        let current = self.0;
        self.0 = (self.0 * 2).min(LAST_RETRY);
        jittered(current)
    }
}
