//! Humane durations: whole numbers with units, largest first: `30s`, `500ms`, `10m`, `2h`,
//! `1h30m250ms` (spaces between the parts, and between a number and its unit, are allowed:
//! `1h 30m`, `30 s`). [`format_ms`] writes the
//! shortest such form, which [`parse_ms`] reads back to the same value.

/// The units, largest first, with their length in milliseconds.
const UNITS: [(&str, u64); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];

/// How a duration is written, for error messages.
pub const FORMAT: &str =
    "whole numbers with a unit h, m, s or ms, largest first, like \"30s\", \"500ms\" or \"1h30m\"";

/// Reads a duration in milliseconds; `0s` is zero. `None` when `text` is not a duration by
/// the rule above (no unit, an unknown unit, a fraction, a sign, units out of order or
/// repeated) or it does not fit in `u64` milliseconds.
pub fn parse_ms(text: &str) -> Option<u64> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    // The index in UNITS the next part's unit must come at or after.
    let mut next_unit = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        // A space may stand between a number and its unit (`30 s`), as it always could.
        rest = rest[digits..].trim_start();
        let letters = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = &rest[..letters];
        rest = rest[letters..].trim_start();
        let at = UNITS.iter().position(|(name, _)| *name == unit)?;
        if at < next_unit {
            return None;
        }
        next_unit = at + 1;
        total = total.checked_add(n.checked_mul(UNITS[at].1)?)?;
    }
    Some(total)
}

/// Reads a duration that must be positive (every option's duration is): as [`parse_ms`], but
/// zero is refused too.
pub fn positive_ms(text: &str) -> Option<u64> {
    parse_ms(text).filter(|ms| *ms > 0)
}

/// The shortest humane form of `ms`: `5m`, `100ms`, `1h30m250ms`, `0ms`.
pub fn format_ms(ms: u64) -> String {
    if ms == 0 {
        return "0ms".into();
    }
    let (mut rest, mut out) = (ms, String::new());
    for (unit, size) in UNITS {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    out
}

/// A `Duration` as [`format_ms`] writes it when it is a whole number of milliseconds (as every
/// duration delayq reads is); else as Rust's `Debug` writes it (`9.5ms`), which is no duration
/// delayq reads, so the value is not rounded out of sight.
pub fn format_duration(d: std::time::Duration) -> String {
    match u64::try_from(d.as_millis()) {
        Ok(ms) if d.subsec_nanos().is_multiple_of(1_000_000) => format_ms(ms),
        _ => format!("{d:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(positive_ms("30s"), Some(30_000));
        assert_eq!(positive_ms("500ms"), Some(500));
        assert_eq!(positive_ms("10m"), Some(600_000));
        assert_eq!(positive_ms(" 2h"), Some(7_200_000));
        assert_eq!(positive_ms("1h30m250ms"), Some(5_400_250));
        assert_eq!(positive_ms("1h 30m"), Some(5_400_000));
        // A space before the unit was always read (the attributes and delayq.toml).
        assert_eq!(positive_ms("30 s"), Some(30_000));
        assert_eq!(positive_ms("500 ms"), Some(500));
        assert_eq!(positive_ms("1 h 30 m"), Some(5_400_000));
        assert_eq!(parse_ms("0s"), Some(0));
        for bad in [
            "",
            "30",
            "s",
            "1.5s",
            "0s",
            "3d",
            "-1s",
            "30m1h",
            "1m1m",
            "1 1h",
            "ms",
            "1hh",
            "99999999999999999999h",
        ] {
            assert_eq!(positive_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_duration_printed_reads_back() {
        let mut samples = vec![0, 1, 999, 1_000, 1_001, 59_999, 60_000, 5_400_250, u64::MAX];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.push(x % 400_000_000_000);
        }
        for ms in samples {
            assert_eq!(
                parse_ms(&format_ms(ms)),
                Some(ms),
                "{ms} -> {}",
                format_ms(ms)
            );
        }
        assert_eq!(format_ms(5_400_250), "1h30m250ms");
        assert_eq!(format_ms(90 * 60_000), "1h30m");
        use std::time::Duration;
        assert_eq!(format_duration(Duration::from_secs(5_400)), "1h30m");
        assert_eq!(format_duration(Duration::from_micros(9_500)), "9.5ms");
    }
}
