//! Retry delay policies: `exp(<base>, <max>)` and `fixed(<delay>)`.

use std::fmt;

use crate::duration::{format_ms, positive_ms};

/// How long to wait before retrying a failed handler run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    /// `base * 2^(attempt-1)`, capped at `max` (the runtime adds jitter: a uniform pick in
    /// the upper half).
    Exponential {
        /// The first delay (ms).
        base_ms: u64,
        /// The cap (ms).
        max_ms: u64,
    },
    /// The same delay every time (ms).
    Fixed {
        /// The delay (ms).
        ms: u64,
    },
}

/// How a backoff is written, for error messages.
pub const FORMAT: &str =
    "\"exp(<base>, <max>)\" or \"fixed(<delay>)\", like \"exp(1s, 10m)\" or \"fixed(5s)\"";

impl Backoff {
    /// Reads `exp(1s, 10m)` or `fixed(5s)`.
    ///
    /// # Errors
    /// Why `text` is not a backoff (as a reason, for the caller to name the field).
    pub fn parse(text: &str) -> Result<Backoff, String> {
        let text = text.trim();
        let malformed = || format!("expected {FORMAT}, found {text:?}");
        if let Some(inner) = text.strip_prefix("exp(").and_then(|t| t.strip_suffix(')')) {
            let (base, max) = inner.split_once(',').ok_or_else(malformed)?;
            let base_ms = positive_ms(base).ok_or_else(malformed)?;
            let max_ms = positive_ms(max).ok_or_else(malformed)?;
            if max_ms < base_ms {
                return Err(format!(
                    "the cap must not be below the base ({} < {})",
                    format_ms(max_ms),
                    format_ms(base_ms)
                ));
            }
            return Ok(Backoff::Exponential { base_ms, max_ms });
        }
        if let Some(inner) = text
            .strip_prefix("fixed(")
            .and_then(|t| t.strip_suffix(')'))
        {
            return Ok(Backoff::Fixed {
                ms: positive_ms(inner).ok_or_else(malformed)?,
            });
        }
        Err(malformed())
    }

    /// The delay before retrying after failed attempt number `attempt` (1-based), in ms,
    /// before jitter.
    pub fn full_delay_ms(&self, attempt: u32) -> u64 {
        match *self {
            Backoff::Fixed { ms } => ms,
            Backoff::Exponential { base_ms, max_ms } => {
                let doublings = attempt.saturating_sub(1).min(40);
                base_ms.saturating_mul(1u64 << doublings).min(max_ms)
            }
        }
    }
}

impl fmt::Display for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Backoff::Exponential { base_ms, max_ms } => {
                write!(f, "exp({}, {})", format_ms(base_ms), format_ms(max_ms))
            }
            Backoff::Fixed { ms } => write!(f, "fixed({})", format_ms(ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoffs_read_and_print_back() {
        for text in ["exp(1s, 10m)", "fixed(5s)", "exp(250ms, 1h30m)"] {
            assert_eq!(Backoff::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(
            Backoff::parse(" exp(1s,10m) "),
            Ok(Backoff::Exponential {
                base_ms: 1_000,
                max_ms: 600_000
            })
        );
        assert!(Backoff::parse("exp(10m, 1s)").unwrap_err().contains("cap"));
        assert!(Backoff::parse("exp(1 s, 10 m)").is_ok());
        for bad in ["", "exp(1s)", "fixed(0s)", "linear(1s)", "exp(1s, 10m"] {
            assert!(Backoff::parse(bad).is_err(), "{bad}");
        }
        let b = Backoff::Exponential {
            base_ms: 100,
            max_ms: 1_000,
        };
        assert_eq!(
            (1..=6).map(|a| b.full_delay_ms(a)).collect::<Vec<_>>(),
            [100, 200, 400, 800, 1_000, 1_000]
        );
        assert_eq!(b.full_delay_ms(u32::MAX), 1_000);
    }
}
