//! Rate limits: `rate = "100/s"` (with an optional `burst`), handler starts per second, minute
//! or hour for a whole topic, across every process.

use crate::SpecError;

/// How a rate is written.
pub const FORMAT: &str = "N/s, N/m or N/h (N a whole number from 1 to 1000000), like \"100/s\"";

/// The most starts a rate may allow per period.
pub const MAX_PER_PERIOD: u64 = 1_000_000;

/// A rate limit: at most `count` handler starts per `period_ms`, with up to `burst` started at
/// once after a quiet spell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Starts allowed per period.
    pub count: u64,
    /// The period (ms): a second, a minute or an hour.
    pub period_ms: u64,
    /// How many may start at once after a quiet spell (at least 1); the starts in any window
    /// of one period never exceed `count + burst`.
    pub burst: u64,
}

impl Rate {
    /// Reads `"N/s"`, `"N/m"` or `"N/h"` (spaces allowed around the parts), with the default
    /// burst ([`default_burst`](Self::default_burst)).
    ///
    /// # Errors
    /// A [`SpecError`] for field `rate` that says the form.
    pub fn parse(text: &str) -> Result<Rate, SpecError> {
        let bad = || SpecError::new("rate", format!("expected {FORMAT}, found {text:?}"));
        let (n, unit) = text.split_once('/').ok_or_else(bad)?;
        let count: u64 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || count > MAX_PER_PERIOD {
            return Err(bad());
        }
        let period_ms = match unit.trim() {
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(bad()),
        };
        let mut rate = Rate {
            count,
            period_ms,
            burst: 1,
        };
        rate.burst = rate.default_burst();
        Ok(rate)
    }

    /// The burst unless one is given: what the rate allows in 100 ms, at least 1 (so a
    /// claim can take a batch, while a one-second window never holds more than 10 % over).
    pub fn default_burst(&self) -> u64 {
        (self.count * 100 / self.period_ms).max(1)
    }

    /// The same rate with `burst` (1 to the rate's count per period).
    ///
    /// # Errors
    /// A [`SpecError`] for field `burst` when it is 0 or more than a period's count.
    pub fn with_burst(mut self, burst: u64) -> Result<Rate, SpecError> {
        if burst == 0 || burst > self.count {
            return Err(SpecError::new(
                "burst",
                format!(
                    "expected a whole number from 1 to the rate's {} per period, found {burst}",
                    self.count
                ),
            ));
        }
        self.burst = burst;
        Ok(self)
    }

    /// The time between two starts at the full rate, in microseconds (fractional).
    pub fn interval_us(&self) -> f64 {
        self.period_ms as f64 * 1000.0 / self.count as f64
    }
}

impl std::fmt::Display for Rate {
    /// The rate as it is written (`100/s`); the burst is a separate option.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = match self.period_ms {
            1_000 => "s",
            60_000 => "m",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_and_print_the_same() {
        for text in ["100/s", "5/m", "1/h", "1000000/s"] {
            assert_eq!(Rate::parse(text).unwrap().to_string(), text);
        }
        let r = Rate::parse(" 200 / s ").unwrap();
        assert_eq!((r.count, r.period_ms, r.burst), (200, 1000, 20));
        assert_eq!(Rate::parse("5/s").unwrap().burst, 1);
        assert_eq!(Rate::parse("600/m").unwrap().burst, 1);
        assert_eq!(Rate::parse("6000/m").unwrap().burst, 10);
        assert!((Rate::parse("3/s").unwrap().interval_us() - 333_333.33).abs() < 0.01);
    }

    #[test]
    fn bad_rates_say_the_form() {
        for text in [
            "",
            "100",
            "0/s",
            "-1/s",
            "1.5/s",
            "10/d",
            "10/sec",
            "1000001/s",
            "/s",
        ] {
            let e = Rate::parse(text).unwrap_err();
            assert_eq!(e.field, "rate");
            assert!(e.reason.contains("N/s, N/m or N/h"), "{text}: {e}");
        }
        let r = Rate::parse("10/s").unwrap();
        assert_eq!(r.with_burst(10).unwrap().burst, 10);
        assert_eq!(r.with_burst(0).unwrap_err().field, "burst");
        assert!(r.with_burst(11).is_err());
    }
}
