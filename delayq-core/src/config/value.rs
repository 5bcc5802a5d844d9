//! A value as a source gives it, the typed value, and where it came from.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

/// Where an effective option's value came from. Highest precedence first: a builder call wins
/// over the environment, which wins over the file, then the attribute, then the default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ConfigSource {
    /// A `Runtime::builder()` call.
    Builder,
    /// An environment variable.
    Environment {
        /// The variable's name.
        variable: String,
    },
    /// The configuration file.
    File {
        /// The file's path.
        path: PathBuf,
        /// The line the value is on (1-based).
        line: usize,
    },
    /// The listener's attribute (`#[delay_listener(concurrency = 8)]`).
    Attribute,
    /// Nothing set it: the default.
    Default,
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::Builder => f.write_str("builder"),
            ConfigSource::Environment { variable } => write!(f, "env {variable}"),
            ConfigSource::File { path, line } => write!(f, "{}:{line}", path.display()),
            ConfigSource::Attribute => f.write_str("attribute"),
            ConfigSource::Default => f.write_str("default"),
        }
    }
}

/// A value given to `Runtime::builder().set(key, value)`: converts from the usual Rust types.
/// Its `Debug` shows a URL's password as `***` (`set("redis_url", …)` may carry one).
#[derive(Clone, PartialEq)]
pub enum ConfigValue {
    /// `true` or `false` (`enabled`).
    Bool(bool),
    /// A whole number (`concurrency`, `max_attempts`, …).
    Int(i64),
    /// A duration (`ack_timeout`, `every`, …).
    Duration(Duration),
    /// Text: a humane duration such as `"30s"`, a backoff, a cron pattern, a URL, an address.
    Text(String),
}

impl fmt::Debug for ConfigValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigValue::Bool(b) => f.debug_tuple("Bool").field(b).finish(),
            ConfigValue::Int(n) => f.debug_tuple("Int").field(n).finish(),
            ConfigValue::Duration(d) => f.debug_tuple("Duration").field(d).finish(),
            ConfigValue::Text(t) => f
                .debug_tuple("Text")
                .field(&crate::error::redact_url(t))
                .finish(),
        }
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for ConfigValue {
            fn from(n: $t) -> Self {
                ConfigValue::Int(i64::try_from(n).unwrap_or(i64::MAX))
            }
        }
    )*};
}
from_int!(i32, u32, i64, u64, usize, u16);

impl From<bool> for ConfigValue {
    fn from(b: bool) -> Self {
        ConfigValue::Bool(b)
    }
}

impl From<Duration> for ConfigValue {
    fn from(d: Duration) -> Self {
        ConfigValue::Duration(d)
    }
}

impl From<&str> for ConfigValue {
    fn from(s: &str) -> Self {
        ConfigValue::Text(s.to_string())
    }
}

impl From<String> for ConfigValue {
    fn from(s: String) -> Self {
        ConfigValue::Text(s)
    }
}

impl From<SocketAddr> for ConfigValue {
    fn from(a: SocketAddr) -> Self {
        ConfigValue::Text(a.to_string())
    }
}

/// A value before it is checked against its option's type.
#[derive(Debug, Clone, PartialEq)]
pub enum Raw {
    /// A typed value (a file or a builder call).
    Typed(ConfigValue),
    /// Text to convert (an environment variable: every value is text there).
    Text(String),
    /// A TOML value of a type no option takes (`"float"`, `"array"`, `"table"`, `"datetime"`).
    Other(&'static str),
}
