//! Listener registrations, collected at link time with `inventory`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::Error;

use crate::handler::ErasedHandler;

/// The wait before a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    /// `base * 2^(attempt-1)`, capped at `max`, with jitter (a uniform pick in the upper half).
    Exponential {
        /// First delay (ms).
        base_ms: u64,
        /// Cap (ms).
        max_ms: u64,
    },
    /// The same delay every time.
    Fixed {
        /// Delay (ms).
        ms: u64,
    },
}

impl Backoff {
    /// The delay before retrying after failed attempt number `attempt` (1-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        match *self {
            Backoff::Fixed { ms } => Duration::from_millis(ms),
            Backoff::Exponential { base_ms, max_ms } => {
                let doublings = attempt.saturating_sub(1).min(40);
                let full = base_ms.saturating_mul(1u64 << doublings).min(max_ms);
                let half = full / 2;
                Duration::from_millis(half + fastrand::u64(0..=full - half))
            }
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
    /// Lease length (auto ack) or the time to ack after the handler returns (manual ack).
    pub ack_timeout_ms: u64,
    /// The retry delay.
    pub backoff: Backoff,
}

impl ListenerOptions {
    /// `ack_timeout` as a `Duration`.
    pub fn ack_timeout(&self) -> Duration {
        Duration::from_millis(self.ack_timeout_ms)
    }
}

/// What `#[delay_listener]` registers.
pub struct ListenerRegistration {
    /// The topic.
    pub topic: &'static str,
    /// `module::path::function`, for messages.
    pub function: &'static str,
    /// The attribute's settings.
    pub options: ListenerOptions,
    /// Builds the erased handler.
    pub handler: fn() -> Arc<dyn ErasedHandler>,
}

inventory::collect!(ListenerRegistration);

/// Every listener linked into this binary; an error when two share a topic.
pub(crate) fn all_listeners() -> Result<Vec<&'static ListenerRegistration>, Error> {
    let mut by_topic: HashMap<&str, &'static ListenerRegistration> = HashMap::new();
    let mut all: Vec<&'static ListenerRegistration> = inventory::iter::<ListenerRegistration>
        .into_iter()
        .collect();
    all.sort_by_key(|r| (r.topic, r.function));
    for r in &all {
        if let Some(first) = by_topic.insert(r.topic, r) {
            return Err(Error::DuplicateListener {
                topic: r.topic.to_string(),
                first: first.function.to_string(),
                second: r.function.to_string(),
            });
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::Backoff;
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
