//! Schedules the tick writer does not try for a while: those whose writes failed, and those
//! whose records cannot be used.

use std::time::Duration;

use tokio::time::Instant;

/// A schedule not tried before `at` (its record cannot be used, or its writes failed): the
/// delay doubles from its first up to `last`.
pub(super) struct Backoff {
    pub(super) at: Instant,
    delay: Duration,
    last: Duration,
}

impl Backoff {
    pub(super) fn new(first: Duration, last: Duration) -> Self {
        Backoff {
            at: Instant::now() + first,
            delay: first,
            last,
        }
    }

    pub(super) fn again(&mut self) {
        self.delay = (self.delay * 2).min(self.last);
        self.at = Instant::now() + self.delay;
    }
}

/// A schedule whose record cannot be used: read again at its backoff's time.
pub(super) struct Broken {
    pub(super) topic: String,
    pub(super) backoff: Backoff,
}
