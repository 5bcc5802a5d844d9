//! The options each kind of component takes, their types and limits (the attributes' limits),
//! and turning a source's value into a typed one with an error that says what was expected.

use std::net::SocketAddr;
use std::time::Duration;

use delayq_spec::duration::{self, format_ms};
use delayq_spec::{Backoff, Rate};

use super::value::{ConfigValue, Raw};
use crate::schedule::{CatchUp, Schedule};

pub use delayq_spec::options::{option, options, synonym, Kind, ValueKind};

/// A checked value.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// A boolean.
    Bool(bool),
    /// A count.
    Count(u32),
    /// A duration (ms).
    Ms(u64),
    /// A backoff policy.
    Backoff(Backoff),
    /// A rate limit (its burst is the separate option `burst`).
    Rate(Rate),
    /// Text (a namespace, cron pattern or time zone).
    Text(String),
    /// A Redis URL, which may carry a password: shown and debug-printed without it.
    RedisUrl(SecretUrl),
    /// An address.
    Addr(SocketAddr),
    /// A catch-up policy.
    CatchUp(CatchUp),
    /// Whether a new group reads the stream from its start.
    FromStart(bool),
}

/// A Redis URL as configured. Its `Display` and `Debug` replace the password with `***`, so
/// that a configuration view, a log line or a `{:?}` never shows it; [`expose`](Self::expose)
/// gives the URL itself, to connect with.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(String);

impl SecretUrl {
    /// Wraps `url`.
    pub fn new(url: impl Into<String>) -> Self {
        SecretUrl(url.into())
    }

    /// The URL with its password.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::error::redact_url(&self.0))
    }
}

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretUrl({:?})", crate::error::redact_url(&self.0))
    }
}

impl std::fmt::Display for Parsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Parsed::Bool(b) => write!(f, "{b}"),
            Parsed::Count(n) => write!(f, "{n}"),
            Parsed::Ms(ms) => f.write_str(&format_ms(*ms)),
            Parsed::Backoff(b) => write!(f, "{b}"),
            Parsed::Rate(r) => write!(f, "{r}"),
            Parsed::Text(t) => f.write_str(t),
            Parsed::RedisUrl(u) => write!(f, "{u}"),
            Parsed::Addr(a) => write!(f, "{a}"),
            Parsed::CatchUp(c) => write!(f, "{c}"),
            Parsed::FromStart(true) => f.write_str("0"),
            Parsed::FromStart(false) => f.write_str("$"),
        }
    }
}

const READY_CHECKS: &str = "\"none\", or \"redis\" and/or \"listeners\" comma-separated";

fn found(raw: &Raw) -> String {
    match raw {
        Raw::Typed(ConfigValue::Bool(b)) => format!("the boolean {b}"),
        Raw::Typed(ConfigValue::Int(n)) => format!("the number {n}"),
        Raw::Typed(ConfigValue::Duration(d)) => {
            format!("the duration {}", duration::format_duration(*d))
        }
        Raw::Typed(ConfigValue::Text(t)) | Raw::Text(t) => format!("{t:?}"),
        Raw::Other(what) => format!("a {what}"),
    }
}

/// The text of a value that must be text (from a file or builder), or of any value from the
/// environment.
fn text(raw: &Raw) -> Option<&str> {
    match raw {
        Raw::Typed(ConfigValue::Text(t)) | Raw::Text(t) => Some(t),
        _ => None,
    }
}

/// Checks `raw` against `kind`; the error says what was expected and what was found.
///
/// # Errors
/// What was expected and what was found, or why the value is refused (a count out of range, a
/// duration too short, an unknown time zone).
pub fn parse(kind: ValueKind, raw: &Raw) -> Result<Parsed, String> {
    let expected = |what: &str| format!("expected {what}, found {}", found(raw));
    match kind {
        ValueKind::Bool => match raw {
            Raw::Typed(ConfigValue::Bool(b)) => Ok(Parsed::Bool(*b)),
            Raw::Text(t) if t.eq_ignore_ascii_case("true") => Ok(Parsed::Bool(true)),
            Raw::Text(t) if t.eq_ignore_ascii_case("false") => Ok(Parsed::Bool(false)),
            _ => Err(expected("true or false")),
        },
        ValueKind::Count { max } => {
            let n = match raw {
                Raw::Typed(ConfigValue::Int(n)) => Some(*n),
                Raw::Text(t) => t.trim().parse::<i64>().ok(),
                _ => None,
            };
            match n {
                Some(n) if (1..=i64::from(max)).contains(&n) => Ok(Parsed::Count(n as u32)),
                _ => Err(expected(&format!("a whole number from 1 to {max}"))),
            }
        }
        ValueKind::Duration { min_ms } => {
            let ms = match raw {
                Raw::Typed(ConfigValue::Duration(d)) => u64::try_from(d.as_millis()).ok(),
                other => text(other).and_then(duration::positive_ms),
            };
            match ms {
                Some(ms) if ms >= min_ms => Ok(Parsed::Ms(ms)),
                Some(_) => Err(format!(
                    "{} is too short: at least {}",
                    found(raw),
                    format_ms(min_ms)
                )),
                None => Err(expected(&format!("a duration: {}", duration::FORMAT))),
            }
        }
        ValueKind::Backoff => match text(raw) {
            Some(t) => Backoff::parse(t).map(Parsed::Backoff),
            None => Err(expected(delayq_spec::BACKOFF_FORMAT)),
        },
        ValueKind::Rate => match text(raw) {
            Some(t) => Rate::parse(t).map(Parsed::Rate).map_err(|e| e.reason),
            None => Err(expected(delayq_spec::RATE_FORMAT)),
        },
        ValueKind::RedisUrl => match text(raw) {
            Some(t) if !t.trim().is_empty() => {
                Ok(Parsed::RedisUrl(SecretUrl(t.trim().to_string())))
            }
            _ => Err(expected("a Redis URL, like \"redis://127.0.0.1:6379\"")),
        },
        ValueKind::Namespace => {
            let t = text(raw).ok_or_else(|| expected("a namespace"))?;
            crate::names::validate_namespace(t).map_err(|e| e.to_string())?;
            Ok(Parsed::Text(t.to_string()))
        }
        ValueKind::Addr => text(raw)
            .and_then(|t| t.trim().parse::<SocketAddr>().ok())
            .map(Parsed::Addr)
            .ok_or_else(|| expected("an address to listen on, like \"0.0.0.0:9090\"")),
        ValueKind::Cron => {
            let t = text(raw).ok_or_else(|| expected("a cron pattern"))?;
            Schedule::cron(t).map_err(|e| e.to_string())?;
            Ok(Parsed::Text(t.trim().to_string()))
        }
        ValueKind::Tz => {
            let t = text(raw).ok_or_else(|| expected("an IANA time zone"))?;
            Schedule::every(Duration::from_secs(60))
                .and_then(|s| s.tz(t))
                .map_err(|e| e.to_string())?;
            Ok(Parsed::Text(t.trim().to_string()))
        }
        ValueKind::ReadyChecks => {
            let t = text(raw).ok_or_else(|| expected(READY_CHECKS))?;
            let words: Vec<&str> = t.split(',').map(str::trim).collect();
            let has = |w: &str| words.contains(&w);
            if t.trim() == "none" {
                return Ok(Parsed::Text("none".into()));
            }
            if words.is_empty() || !words.iter().all(|w| *w == "redis" || *w == "listeners") {
                return Err(expected(READY_CHECKS));
            }
            let normal = match (has("redis"), has("listeners")) {
                (true, true) => "redis,listeners",
                (true, false) => "redis",
                _ => "listeners",
            };
            Ok(Parsed::Text(normal.into()))
        }
        ValueKind::CatchUp => text(raw)
            .and_then(|t| t.trim().parse::<CatchUp>().ok())
            .map(Parsed::CatchUp)
            .ok_or_else(|| expected("\"last\", \"none\" or \"all\"")),
        ValueKind::StreamStart => match text(raw).map(str::trim) {
            Some("$") => Ok(Parsed::FromStart(false)),
            Some("0") => Ok(Parsed::FromStart(true)),
            _ => Err(expected(
                "\"$\" (new entries only) or \"0\" (the whole stream)",
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_against_their_type() {
        let text = |s: &str| Raw::Text(s.to_string());
        let count = ValueKind::Count { max: 10 };
        assert_eq!(parse(count, &text("7")), Ok(Parsed::Count(7)));
        assert_eq!(parse(count, &Raw::Typed(7.into())), Ok(Parsed::Count(7)));
        assert!(parse(count, &text("11"))
            .unwrap_err()
            .contains("from 1 to 10"));
        assert!(parse(count, &Raw::Typed("7".into())).is_err());
        let lease = ValueKind::Duration { min_ms: 100 };
        assert_eq!(parse(lease, &text("30s")), Ok(Parsed::Ms(30_000)));
        assert!(parse(lease, &text("50ms"))
            .unwrap_err()
            .contains("too short"));
        assert!(parse(lease, &Raw::Typed(30.into())).is_err());
        assert_eq!(
            parse(ValueKind::Backoff, &text("exp(1s, 10m)")).map(|p| p.to_string()),
            Ok("exp(1s, 10m)".to_string())
        );
        assert!(parse(ValueKind::Backoff, &text("exp(10m, 1s)")).is_err());
        assert_eq!(
            parse(ValueKind::Bool, &text("FALSE")),
            Ok(Parsed::Bool(false))
        );
        assert!(parse(ValueKind::Bool, &Raw::Typed("false".into())).is_err());
        assert!(parse(ValueKind::Tz, &text("Mars/Olympus")).is_err());
        assert_eq!(
            parse(ValueKind::ReadyChecks, &text(" listeners , redis")),
            Ok(Parsed::Text("redis,listeners".into()))
        );
        assert_eq!(
            parse(ValueKind::ReadyChecks, &text("none")),
            Ok(Parsed::Text("none".into()))
        );
        let err = parse(ValueKind::ReadyChecks, &text("redis,db")).unwrap_err();
        assert!(err.contains("\"listeners\""), "{err}");
        assert!(parse(ValueKind::Cron, &text("0 25 * * *"))
            .unwrap_err()
            .contains("hour"));
    }
}
