//! A listener's settings as the attribute gives them, and the retry delays they imply.

use std::time::Duration;

/// A delay of `full`, jittered: a uniform pick in its upper half, so that many retries
/// scheduled at once spread out. The one jitter rule of the runtime (listener backoff and
/// Redis reconnects both use it).
pub(crate) fn jittered(full: Duration) -> Duration {
    let ms = u64::try_from(full.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(ms - ms / 2 + fastrand::u64(0..=ms / 2))
}

/// A retry delay policy (`delayq-spec`'s, which the attributes and `delayq.toml` both read).
pub use delayq_core::config::{Backoff, Rate};
pub use delayq_core::protocol::Flow;

/// The wait before a retry, as the runtime takes it.
pub(crate) trait RetryDelay {
    /// The delay before retrying after failed attempt number `attempt` (1-based): an
    /// exponential policy's `base * 2^(attempt-1)`, capped, with jitter (a uniform pick in the
    /// upper half); a fixed one's delay as it is.
    fn delay(&self, attempt: u32) -> Duration;
}

impl RetryDelay for Backoff {
    fn delay(&self, attempt: u32) -> Duration {
        let full = Duration::from_millis(self.full_delay_ms(attempt));
        match self {
            Backoff::Fixed { .. } => full,
            Backoff::Exponential { .. } => jittered(full),
        }
    }
}

/// A listener's settings, from the attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerOptions {
    /// Handlers running at once in one process.
    pub concurrency: u32,
    /// Handler runs in all before the message is dead-lettered.
    pub max_attempts: u32,
    /// How long a claim holds while the handler runs (auto ack), or the time to ack after the handler returns (manual ack).
    pub ack_timeout_ms: u64,
    /// The retry delay.
    pub backoff: Backoff,
    /// A run's hard limit (ms), if any: at it the handler's future is dropped and the run
    /// counts as a failed attempt.
    pub timeout_ms: Option<u64>,
    /// The topic's rate limit and dead-letter bounds (delay listeners; a stream listener and a
    /// schedule keep the defaults).
    pub flow: Flow,
}

impl ListenerOptions {
    /// `ack_timeout` as a `Duration`.
    pub fn ack_timeout(&self) -> Duration {
        Duration::from_millis(self.ack_timeout_ms)
    }

    /// `timeout` as a `Duration`, if any.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout_ms.map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::{Backoff, RetryDelay};
    use std::time::Duration;

    #[test]
    fn exponential_backoff_doubles_with_jitter_up_to_the_cap() {
        let b = Backoff::Exponential {
            base_ms: 1000,
            max_ms: 600_000,
        };
        for _ in 0..100 {
            let d1 = b.delay(1);
            assert!(d1 >= Duration::from_millis(500) && d1 <= Duration::from_millis(1000));
            let d4 = b.delay(4);
            assert!(d4 >= Duration::from_millis(4000) && d4 <= Duration::from_millis(8000));
            let d30 = b.delay(30);
            assert!(d30 >= Duration::from_millis(300_000) && d30 <= Duration::from_millis(600_000));
        }
        assert_eq!(Backoff::Fixed { ms: 5 }.delay(9), Duration::from_millis(5));
    }
}
