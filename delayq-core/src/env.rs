//! What comes from the environment: the Redis URL (and where it came from, so that an error
//! can say what to change), the namespace, and the CA file for TLS.

use std::fmt;

use crate::config::{ConfigFile, ConfigSource, Parsed, Scope, SecretUrl};

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

/// Where a part that connects — a producer, a waiting room, the CLI, the dashboard — finds
/// Redis and its namespace, in the runtime's order: the caller's own value, else the variable
/// (`DELAYQ_REDIS_URL`, `DELAYQ_NAMESPACE`), else `delayq.toml` (`DELAYQ_CONFIG`, else
/// `./delayq.toml`), else the default. Each with where it came from.
#[derive(Debug, Clone)]
pub struct Connection {
    /// The URL to connect to.
    pub redis_url: SecretUrl,
    /// Where it came from (for errors: what to change).
    pub url_origin: UrlOrigin,
    /// Where it came from, as the runtime's configuration says it (`env DELAYQ_REDIS_URL`,
    /// `delayq.toml:3`, `default`).
    pub url_source: ConfigSource,
    /// The namespace.
    pub namespace: String,
    /// Where it came from.
    pub namespace_source: ConfigSource,
}

fn variable(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Resolves [`Connection`]: `url` and `namespace` are the caller's own (`Producer::connect`'s
/// argument, a `--redis-url` flag), which win.
///
/// # Errors
/// [`Error::Config`](crate::Error::Config) when a runtime variable is misspelt, or the
/// configuration file (always the one `DELAYQ_CONFIG` names; `./delayq.toml` when needed)
/// cannot be read or has problems: what the runtime would refuse too.
pub fn resolve_connection(
    url: Option<(&str, UrlOrigin)>,
    namespace: Option<&str>,
) -> crate::Result<Connection> {
    // What the runtime refuses, refused here too: a misspelt runtime variable.
    let typos: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .filter_map(|name| crate::config::runtime_variable_typo(&name))
        .collect();
    if !typos.is_empty() {
        return Err(crate::Error::Config(format!(
            "invalid configuration: {}",
            typos.join("\n")
        )));
    }
    let mut redis_url = url.map(|(u, origin)| (u.to_string(), origin, ConfigSource::Builder));
    if redis_url.is_none() {
        redis_url = variable("DELAYQ_REDIS_URL").map(|u| {
            let source = ConfigSource::Environment {
                variable: "DELAYQ_REDIS_URL".into(),
            };
            (u, UrlOrigin::Env, source)
        });
    }
    let mut namespace = namespace.map(|n| (n.to_string(), ConfigSource::Builder));
    if namespace.is_none() {
        namespace = variable("DELAYQ_NAMESPACE").map(|n| {
            let source = ConfigSource::Environment {
                variable: "DELAYQ_NAMESPACE".into(),
            };
            (n, source)
        });
    }
    // The file named by DELAYQ_CONFIG is always read (a missing one is an error, as for the
    // runtime); ./delayq.toml when something is still unset.
    let named = std::env::var_os(crate::config::CONFIG_VAR).is_some();
    if named || redis_url.is_none() || namespace.is_none() {
        if let Some(path) = ConfigFile::locate(None) {
            let file = ConfigFile::read(&path)?;
            for s in file.settings.iter().filter(|s| s.scope == Scope::Runtime) {
                let source = ConfigSource::File {
                    path: path.clone(),
                    line: s.line,
                };
                match (&s.value, s.option) {
                    (Parsed::RedisUrl(u), "redis_url") if redis_url.is_none() => {
                        redis_url = Some((u.expose().to_string(), UrlOrigin::File, source));
                    }
                    (Parsed::Text(n), "namespace") if namespace.is_none() => {
                        namespace = Some((n.clone(), source));
                    }
                    _ => {}
                }
            }
        }
    }
    let (url, url_origin, url_source) = redis_url.unwrap_or_else(|| {
        let url = DEFAULT_REDIS_URL.to_string();
        (url, UrlOrigin::Default, ConfigSource::Default)
    });
    let (namespace, namespace_source) =
        namespace.unwrap_or_else(|| (DEFAULT_NAMESPACE.to_string(), ConfigSource::Default));
    Ok(Connection {
        redis_url: SecretUrl::new(url),
        url_origin,
        url_source,
        namespace,
        namespace_source,
    })
}
