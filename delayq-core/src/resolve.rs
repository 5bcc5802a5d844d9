//! Where a part that connects finds Redis and its namespace (`resolve_connection`), and the
//! producer's constructors built on it: the runtime's order (caller, variable, `delayq.toml`,
//! default) for every part, in one place. Its own module so that `producer` and `env` stay
//! below `config` (which reads schedules, which are the producer's).

use crate::config::{ConfigFile, ConfigSource, Parsed, Scope, SecretUrl};
use crate::connection::RedisConn;
use crate::env::{UrlOrigin, DEFAULT_NAMESPACE, DEFAULT_REDIS_URL};
use crate::error::Result;
use crate::names::validate_namespace;
use crate::producer::Producer;

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

impl Producer {
    /// Connects to `url` (`redis://[user:password@]host:port[/db]`), namespace from
    /// `DELAYQ_NAMESPACE`, else `namespace` in `delayq.toml` (`DELAYQ_CONFIG`, else
    /// `./delayq.toml`), else `delayq` — as the runtime resolves it. To send to a runtime you
    /// run in this process, take `RuntimeHandle::producer()` instead: it shares the runtime's
    /// URL and namespace.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`](crate::Error::InvalidUrl), [`Error::Connect`](crate::Error::Connect),
    /// [`Error::Auth`](crate::Error::Auth), [`Error::Tls`](crate::Error::Tls) or
    /// [`Error::RedisTooOld`](crate::Error::RedisTooOld), each saying what to change;
    /// [`Error::Config`](crate::Error::Config) when `delayq.toml` is needed and has problems.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_resolved(&resolve_connection(Some((url, UrlOrigin::Argument)), None)?).await
    }

    /// Connects to `DELAYQ_REDIS_URL`, else `redis_url` in `delayq.toml` (`DELAYQ_CONFIG`,
    /// else `./delayq.toml`), else `redis://127.0.0.1:6379`; the namespace as
    /// [`connect`](Self::connect) finds it. The same order as the runtime's, so a producer and
    /// the runtime of one service meet in the same Redis and namespace.
    ///
    /// # Errors
    /// As [`connect`](Self::connect); the message names `DELAYQ_REDIS_URL` when the URL came from
    /// it. [`Error::InvalidNamespace`](crate::Error::InvalidNamespace) for a bad
    /// `DELAYQ_NAMESPACE`.
    pub async fn connect_from_env() -> Result<Self> {
        Self::connect_resolved(&resolve_connection(None, None)?).await
    }

    /// Connects as `connection` says (see [`resolve_connection`](crate::resolve_connection)).
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub async fn connect_resolved(connection: &Connection) -> Result<Self> {
        validate_namespace(&connection.namespace)?;
        let conn = RedisConn::connect(connection.redis_url.expose(), connection.url_origin).await?;
        Ok(Self::over(conn, &connection.namespace))
    }
}
