//! When a message becomes due, as the scripts take it.

/// When a message becomes due, as the scripts take it (`when_kind`, `when`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Due {
    /// Milliseconds from the Redis server's now.
    InMs(u64),
    /// Unix milliseconds.
    AtMs(u64),
}

impl Due {
    /// The due time in unix ms by this machine's clock (for a delay, an estimate of the
    /// server's).
    pub(crate) fn expected_unix_ms(self) -> u64 {
        match self {
            Due::InMs(ms) => {
                crate::time::time_to_ms(std::time::SystemTime::now()).saturating_add(ms)
            }
            Due::AtMs(ms) => ms,
        }
    }

    /// Whether it is unix ms, and its ms.
    pub(crate) fn at_and_ms(self) -> (bool, u64) {
        match self {
            Due::InMs(ms) => (false, ms),
            Due::AtMs(ms) => (true, ms),
        }
    }

    /// The scripts' `when_kind` and `when`.
    pub(super) fn kind_and_ms(self) -> (&'static str, u64) {
        let (at, ms) = self.at_and_ms();
        (when_kind(at), ms)
    }
}

/// The scripts' `when_kind` of a due time: unix ms (`at`) or ms from the server's now.
pub(super) fn when_kind(at: bool) -> &'static str {
    if at {
        "at"
    } else {
        "delay"
    }
}
