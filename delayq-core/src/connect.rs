//! Connecting to Redis, keeping the connection alive through silent network failures, and
//! turning Redis' errors into ones that say what to do.

use std::fmt;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::io::tcp::{socket2::TcpKeepalive, TcpSettings};
use redis::{ErrorKind, IntoConnectionInfo, RedisError};

use crate::error::{redact_url, Error, Result};
use crate::keys::TopicKeys;

/// The Redis URL used when `DELAYQ_REDIS_URL` is not set.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// The oldest Redis delayq runs on: its scripts use `ZMSCORE` and `ZADD … GT` (6.2).
pub const MIN_REDIS_VERSION: (u32, u32) = (6, 2);

/// A command without an answer for this long counts as a dead connection: it fails, and the
/// connection is replaced. Large batches run as one script, so this is not tight.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// One attempt to open a connection (TCP, TLS, AUTH, HELLO) gives up after this long.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(3);
/// TCP keepalive: the first probe after this much silence, then every `KEEPALIVE_INTERVAL`;
/// a peer that a NAT or load balancer dropped without a FIN is found within about 25 s even
/// when no command is waiting. `TCP_USER_TIMEOUT` bounds unacknowledged writes the same way.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;
const USER_TIMEOUT: Duration = Duration::from_secs(25);

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
        })
    }
}

/// `DELAYQ_REDIS_URL` with where it came from, or [`DEFAULT_REDIS_URL`].
pub fn redis_url_from_env() -> (String, UrlOrigin) {
    match std::env::var("DELAYQ_REDIS_URL") {
        Ok(url) if !url.trim().is_empty() => (url, UrlOrigin::Env),
        _ => (DEFAULT_REDIS_URL.to_string(), UrlOrigin::Default),
    }
}

/// `DELAYQ_NAMESPACE`, or [`crate::DEFAULT_NAMESPACE`].
pub fn namespace_from_env() -> String {
    std::env::var("DELAYQ_NAMESPACE")
        .ok()
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| crate::keys::DEFAULT_NAMESPACE.to_string())
}

/// The variable naming a PEM file of certificate authorities to trust for `rediss://` URLs
/// (without it, the system's trust store is used).
pub const CA_FILE_VAR: &str = "DELAYQ_REDIS_CA_FILE";

fn tcp_settings() -> TcpSettings {
    let keepalive = TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_RETRIES);
    let settings = TcpSettings::default().set_keepalive(keepalive);
    #[cfg(target_os = "linux")]
    let settings = settings.set_user_timeout(USER_TIMEOUT);
    #[cfg(not(target_os = "linux"))]
    let _ = USER_TIMEOUT;
    settings
}

/// A client for `url`, with TCP keepalive. For `rediss://` (TLS) it trusts the CAs in
/// `DELAYQ_REDIS_CA_FILE` when that is set, else the system's trust store.
pub fn open_client(url: &str) -> Result<redis::Client> {
    static CRYPTO: Once = Once::new();
    CRYPTO.call_once(|| {
        // An application that installed its own rustls provider keeps it.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let invalid = |e: redis::RedisError| Error::InvalidUrl {
        url: redact_url(url),
        reason: e.to_string(),
    };
    let info = url
        .into_connection_info()
        .map_err(invalid)?
        .set_tcp_settings(tcp_settings());
    let ca_file = std::env::var_os(CA_FILE_VAR).filter(|v| !v.is_empty());
    match ca_file {
        Some(path) if url.starts_with("rediss://") => {
            let pem = std::fs::read(&path).map_err(|source| Error::CaFile {
                path: std::path::PathBuf::from(&path),
                source,
            })?;
            let certs = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem),
            };
            redis::Client::build_with_tls(info, certs).map_err(invalid)
        }
        _ => redis::Client::open(info).map_err(invalid),
    }
}

/// A reconnecting, multiplexed connection that also survives a peer that vanished without
/// closing the socket (a NAT or load balancer dropping idle flows): a command that gets no
/// answer within the response timeout fails, and the connection is replaced before the next
/// one. The `redis` crate's own manager reconnects only when the socket reports an error,
/// which a black-holed flow never does.
#[derive(Clone)]
pub struct RedisConn {
    shared: Arc<Shared>,
}

struct Shared {
    client: redis::Client,
    url: String,
    origin: UrlOrigin,
    /// The connection in use and a generation number, bumped on every replacement so that a
    /// burst of timeouts on one dead connection replaces it once.
    current: Mutex<(u64, ConnectionManager)>,
    replacing: tokio::sync::Mutex<()>,
}

impl fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConn")
            .field("url", &redact_url(&self.shared.url))
            .finish_non_exhaustive()
    }
}

fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(1))
}

impl RedisConn {
    /// Connects to `url`, which came from `origin`. It fails at once, with an error that
    /// names the (redacted) URL and where it came from, when Redis cannot be reached, refuses
    /// the credentials, or is older than [`MIN_REDIS_VERSION`].
    pub async fn connect(url: &str, origin: UrlOrigin) -> Result<Self> {
        let client = open_client(url)?;
        let mut manager = ConnectionManager::new_with_config(client.clone(), manager_config())
            .await
            .map_err(|source| connect_error(url, origin, source))?;
        check_version(&mut manager, url).await?;
        Ok(RedisConn {
            shared: Arc::new(Shared {
                client,
                url: url.to_string(),
                origin,
                current: Mutex::new((0, manager)),
                replacing: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The URL, with any password hidden.
    pub fn shown_url(&self) -> String {
        redact_url(&self.shared.url)
    }

    /// The URL as given (with its password), to open more connections such as a subscriber.
    pub fn url(&self) -> &str {
        &self.shared.url
    }

    /// Where the URL came from.
    pub fn origin(&self) -> UrlOrigin {
        self.shared.origin
    }

    /// The client behind it, for connections of other kinds (pub/sub).
    pub fn client(&self) -> &redis::Client {
        &self.shared.client
    }

    fn current(&self) -> (u64, ConnectionManager) {
        // A panic while holding this lock cannot leave the pair half-updated.
        self.shared
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs `call` on the current connection; when it times out (the peer is silent), the
    /// connection is replaced so that the next call does not wait on it again.
    pub async fn run<T, F, Fut>(&self, call: F) -> redis::RedisResult<T>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let (generation, conn) = self.current();
        let result = call(conn).await;
        if let Err(e) = &result {
            if e.is_timeout() {
                self.replace(generation).await;
            }
        }
        result
    }

    /// Replaces connection `generation` with a new one, unless someone already did.
    async fn replace(&self, generation: u64) {
        let _one_at_a_time = self.shared.replacing.lock().await;
        if self.current().0 != generation {
            return;
        }
        match ConnectionManager::new_with_config(self.shared.client.clone(), manager_config()).await
        {
            Ok(fresh) => {
                let mut current = self
                    .shared
                    .current
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                *current = (generation + 1, fresh);
                tracing::info!(
                    url = %self.shown_url(),
                    "Redis stopped answering on a connection; opened a new one"
                );
            }
            Err(error) => tracing::debug!(
                url = %self.shown_url(),
                %error,
                "Redis stopped answering and a new connection failed too; trying again on the next call"
            ),
        }
    }
}

fn connect_error(url: &str, origin: UrlOrigin, source: RedisError) -> Error {
    let url = redact_url(url);
    if is_auth_error(&source) {
        Error::Auth {
            url,
            origin,
            source,
        }
    // The redis crate reports a rejected certificate as an I/O error whose text names it;
    // there is no error kind for it, so the text is what tells TLS trouble apart.
    } else if url.starts_with("rediss://") && source.to_string().contains("certificate") {
        Error::Tls { url, source }
    } else {
        Error::Connect {
            url,
            origin,
            source,
        }
    }
}

/// `redis_version` from `INFO server`, as (major, minor).
pub(crate) fn parse_version(info: &str) -> Option<(u32, u32)> {
    let version = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("redis_version:"))?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

async fn check_version(conn: &mut ConnectionManager, url: &str) -> Result<()> {
    let info: String = match redis::cmd("INFO").arg("server").query_async(conn).await {
        Ok(info) => info,
        // An ACL user confined to delayq's keys need not be allowed INFO; its first script
        // call then says what is missing if the server is too old.
        Err(e) if e.code() == Some("NOPERM") => {
            tracing::debug!(url = %redact_url(url), "not allowed to run INFO; Redis' version is not checked");
            return Ok(());
        }
        Err(e) => return Err(Error::Redis(e)),
    };
    let Some(found) = parse_version(&info) else {
        // A server that hides its version (a proxy, a compatible store) is given the benefit of
        // the doubt; the first script that needs a missing command will say so.
        tracing::debug!(url = %redact_url(url), "Redis did not report redis_version");
        return Ok(());
    };
    if found < MIN_REDIS_VERSION {
        return Err(Error::RedisTooOld {
            url: redact_url(url),
            found: format!("{}.{}", found.0, found.1),
            minimum: format!("{}.{}", MIN_REDIS_VERSION.0, MIN_REDIS_VERSION.1),
        });
    }
    Ok(())
}

fn is_auth_error(e: &RedisError) -> bool {
    // The server's WRONGPASS reply reaches us as the text of a handshake error on some paths,
    // without a code, so the text is checked too.
    matches!(e.kind(), ErrorKind::AuthenticationFailed)
        || matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
        || e.to_string().contains("WRONGPASS")
}

/// Turns a failed call on `keys` into an [`Error`]; a WRONGTYPE is traced to the key that
/// holds the foreign value, so the message can name it.
pub(crate) async fn explain(conn: &RedisConn, keys: &TopicKeys, err: RedisError) -> Error {
    // Inside a script, a command's WRONGTYPE comes back as a script error whose code is the
    // script's, with WRONGTYPE only in its text; so the text is checked too.
    if !matches!(err.code(), Some("WRONGTYPE")) && !err.to_string().contains("WRONGTYPE") {
        return Error::Redis(err);
    }
    let (_, mut c) = conn.current();
    for (key, expected) in keys.typed() {
        let found: Option<String> = redis::cmd("TYPE").arg(key).query_async(&mut c).await.ok();
        if let Some(found) = found.filter(|t| t != expected && t != "none") {
            return Error::WrongType {
                key: key.to_string(),
                expected,
                found,
            };
        }
    }
    Error::Redis(err)
}

/// Runs a script on the topic whose keys are `keys`; a failure is explained as above.
pub(crate) async fn invoke<T: redis::FromRedisValue>(
    conn: &RedisConn,
    keys: &TopicKeys,
    script: &redis::ScriptInvocation<'_>,
) -> Result<T> {
    match conn
        .run(|mut c| async move { script.invoke_async(&mut c).await })
        .await
    {
        Ok(v) => Ok(v),
        Err(e) => Err(explain(conn, keys, e).await),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_version;

    #[test]
    fn reads_the_server_version() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:0\r\n";
        assert_eq!(parse_version(info), Some((7, 0)));
        assert_eq!(parse_version("redis_version:6.0.16\n"), Some((6, 0)));
        assert!(parse_version("redis_version:6.0.16\n").unwrap() < super::MIN_REDIS_VERSION);
        assert!(parse_version("redis_version:6.2.0\n").unwrap() >= super::MIN_REDIS_VERSION);
        assert_eq!(parse_version("# Server\r\n"), None);
    }
}
