//! Redis trouble is logged once when it starts and once when it ends, not on every retry, and
//! retried with capped exponential backoff. Since when a component fails, and why, is kept for
//! `RuntimeHandle::health`.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::options::jittered;

const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(5);

/// Whether one component is currently failing to reach Redis.
pub(crate) struct Health {
    component: String,
    failing: AtomicBool,
    /// Since when and the first error, while failing.
    since: Mutex<Option<(SystemTime, String)>>,
}

impl Health {
    pub(crate) fn new(component: String) -> Self {
        Health {
            component,
            failing: AtomicBool::new(false),
            since: Mutex::new(None),
        }
    }

    /// Since when this component fails, and the error it failed with first; `None` while it
    /// works.
    pub(crate) fn failing_since(&self) -> Option<(SystemTime, String)> {
        if !self.failing.load(Ordering::Relaxed) {
            return None;
        }
        self.since.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn failed(&self, error: &dyn Display) {
        if !self.failing.swap(true, Ordering::Relaxed) {
            *self.since.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((SystemTime::now(), error.to_string()));
            tracing::warn!(component = %self.component, %error, "Redis call failed; retrying with backoff until it works again");
        } else {
            tracing::debug!(component = %self.component, %error, "Redis call failed again");
        }
    }

    pub(crate) fn ok(&self) {
        if self.failing.swap(false, Ordering::Relaxed) {
            *self.since.lock().unwrap_or_else(|p| p.into_inner()) = None;
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
