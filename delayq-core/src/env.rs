//! What comes from the environment: the Redis URL (and where it came from, so that an error
//! can say what to change), the namespace, and the CA file for TLS.

use std::fmt;

/// The Redis URL used when `DELAYQ_REDIS_URL` is not set.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// The default namespace, overridden by `DELAYQ_NAMESPACE`.
pub const DEFAULT_NAMESPACE: &str = "delayq";

/// Where a Redis URL came from, so that an error can say what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlOrigin {
    /// The `DELAYQ_REDIS_URL` variable.
    Env,
    /// Nothing was set: [`DEFAULT_REDIS_URL`].
    Default,
    /// `Runtime::builder().redis_url(..)`.
    Builder,
    /// An argument such as `Producer::connect(url)`.
    Argument,
    /// `redis_url` in the configuration file.
    File,
    /// A command-line flag (`delayq --redis-url`).
    CommandLine,
}

impl UrlOrigin {
    /// What to change to point delayq at another Redis.
    pub fn remedy(self) -> &'static str {
        match self {
            UrlOrigin::Env | UrlOrigin::Default => {
                "set DELAYQ_REDIS_URL to point delayq at the right Redis"
            }
            UrlOrigin::Builder => "pass the right URL to Runtime::builder().redis_url(..)",
            UrlOrigin::Argument => "pass the right URL to Producer::connect(..)",
            UrlOrigin::File => "change redis_url in the configuration file (DELAYQ_CONFIG or ./delayq.toml), or set DELAYQ_REDIS_URL",
            UrlOrigin::CommandLine => "pass the right URL with --redis-url",
        }
    }
}

impl fmt::Display for UrlOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UrlOrigin::Env => "from DELAYQ_REDIS_URL",
            UrlOrigin::Default => "the default: DELAYQ_REDIS_URL is not set",
            UrlOrigin::Builder => "from Runtime::builder().redis_url(..)",
            UrlOrigin::Argument => "passed to Producer::connect(..)",
            UrlOrigin::File => "from redis_url in the configuration file",
            UrlOrigin::CommandLine => "from --redis-url",
        })
    }
}

/// The variable naming a PEM file of certificate authorities to trust for `rediss://` URLs
/// (without it, the system's trust store is used).
pub const CA_FILE_VAR: &str = "DELAYQ_REDIS_CA_FILE";
