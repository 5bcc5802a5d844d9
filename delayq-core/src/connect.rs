//! Connecting to Redis and turning its errors into ones that say what to do.

use std::sync::Once;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError};

use crate::error::{redact_url, Error, Result};
use crate::keys::TopicKeys;

/// The Redis URL used when `DELAYQ_REDIS_URL` is not set.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// `DELAYQ_REDIS_URL`, or [`DEFAULT_REDIS_URL`].
pub fn redis_url_from_env() -> String {
    std::env::var("DELAYQ_REDIS_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_REDIS_URL.to_string())
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

/// A client for `url`. For `rediss://` (TLS) it trusts the CAs in `DELAYQ_REDIS_CA_FILE`
/// when that is set, else the system's trust store.
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
    let ca_file = std::env::var_os(CA_FILE_VAR).filter(|v| !v.is_empty());
    match ca_file {
        Some(path) if url.starts_with("rediss://") => {
            let pem = std::fs::read(&path).map_err(|e| {
                Error::Config(format!(
                    "cannot read {CA_FILE_VAR}={}: {e}",
                    std::path::Path::new(&path).display()
                ))
            })?;
            let certs = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem),
            };
            redis::Client::build_with_tls(url, certs).map_err(invalid)
        }
        _ => redis::Client::open(url).map_err(invalid),
    }
}

/// Opens a reconnecting, multiplexed connection. It fails at once, with an error that names
/// the (redacted) URL, when Redis cannot be reached or refuses the credentials; later
/// disconnects are repaired on the next command.
pub async fn connect(url: &str) -> Result<ConnectionManager> {
    let shown = redact_url(url);
    let client = open_client(url)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(3)))
        // Big batches run as one script; give them time before calling the server gone.
        .set_response_timeout(Some(Duration::from_secs(10)))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(1));
    ConnectionManager::new_with_config(client, config)
        .await
        .map_err(|source| {
            if is_auth_error(&source) {
                Error::Auth { url: shown, source }
            } else if url.starts_with("rediss://") && source.to_string().contains("certificate") {
                Error::Tls { url: shown, source }
            } else {
                Error::Connect { url: shown, source }
            }
        })
}

fn is_auth_error(e: &RedisError) -> bool {
    matches!(e.kind(), ErrorKind::AuthenticationFailed)
        || matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
        || e.to_string().contains("WRONGPASS")
}

/// Turns a failed call on `keys` into an [`Error`]; a WRONGTYPE is traced to the key that
/// holds the foreign value, so the message can name it.
pub(crate) async fn explain(
    conn: &mut ConnectionManager,
    keys: &TopicKeys,
    err: RedisError,
) -> Error {
    if !err.to_string().contains("WRONGTYPE") {
        return Error::Redis(err);
    }
    for (key, expected) in keys.typed() {
        let found: Option<String> = redis::cmd("TYPE").arg(key).query_async(conn).await.ok();
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
    conn: &ConnectionManager,
    keys: &TopicKeys,
    script: &redis::ScriptInvocation<'_>,
) -> Result<T> {
    let mut conn = conn.clone();
    match script.invoke_async(&mut conn).await {
        Ok(v) => Ok(v),
        Err(e) => Err(explain(&mut conn, keys, e).await),
    }
}
