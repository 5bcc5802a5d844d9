//! Opening a client for a Redis URL (TLS, TCP keepalive), and what is
//! checked on connect (credentials, the server's version).

use std::sync::Once;
use std::time::Duration;

use redis::io::tcp::{socket2::TcpKeepalive, TcpSettings};
use redis::{ErrorKind, IntoConnectionInfo, RedisError};

use crate::env::{UrlOrigin, CA_FILE_VAR};
use crate::error::{Error, Result};
use crate::redact::redact_url;

/// The oldest Redis delayq runs on: the oldest its test suite runs against (7.0). Its scripts
/// need 6.2 at least (`ZMSCORE`, `ZADD … GT`, `XPENDING … IDLE`), but 6.2 answers a claim of a
/// trimmed stream entry differently and is not tested, so it is refused.
pub const MIN_REDIS_VERSION: (u32, u32) = (7, 0);

/// TCP keepalive: the first probe after this much silence, then every `KEEPALIVE_INTERVAL`;
/// a peer that a NAT or load balancer dropped without a FIN is found within about 25 s even
/// when no command is waiting. `TCP_USER_TIMEOUT` bounds unacknowledged writes the same way.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;
const USER_TIMEOUT: Duration = Duration::from_secs(25);

pub(crate) fn tcp_settings() -> TcpSettings {
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
    open_client_at(url, None)
}

/// As [`open_client`], with `url`'s credentials and TLS settings but to `host:port` when
/// given (a cluster node that is not among the seeds).
pub(crate) fn open_client_at(url: &str, at: Option<(&str, u16)>) -> Result<redis::Client> {
    static CRYPTO: Once = Once::new();
    CRYPTO.call_once(|| {
        // An application that installed its own rustls provider keeps it.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let invalid = |e: redis::RedisError| Error::InvalidUrl {
        url: redact_url(url),
        reason: e.to_string(),
    };
    let mut info = url
        .into_connection_info()
        .map_err(invalid)?
        .set_tcp_settings(tcp_settings());
    if let Some((host, port)) = at {
        let addr = match info.addr().clone() {
            redis::ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => redis::ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure,
                tls_params,
            },
            _ => redis::ConnectionAddr::Tcp(host.to_string(), port),
        };
        info = info.set_addr(addr);
    }
    match tls_certificates(url)? {
        Some(certs) => redis::Client::build_with_tls(info, certs).map_err(invalid),
        None => redis::Client::open(info).map_err(invalid),
    }
}

/// The CAs to trust for a TLS URL, from `DELAYQ_REDIS_CA_FILE`; `None` for a plain URL or
/// when the variable is unset (the system's trust store).
pub(crate) fn tls_certificates(url: &str) -> Result<Option<redis::TlsCertificates>> {
    let tls = url.starts_with("rediss://") || url.starts_with("rediss+sentinel://");
    let ca_file = std::env::var_os(CA_FILE_VAR).filter(|v| !v.is_empty());
    match ca_file {
        Some(path) if tls => {
            let pem = std::fs::read(&path).map_err(|source| Error::CaFile {
                path: std::path::PathBuf::from(&path),
                source,
            })?;
            Ok(Some(redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem),
            }))
        }
        _ => Ok(None),
    }
}

pub(crate) fn connect_error(url: &str, origin: UrlOrigin, source: RedisError) -> Error {
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

pub(crate) async fn check_version(
    conn: &mut impl redis::aio::ConnectionLike,
    url: &str,
) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::parse_version;

    #[test]
    fn reads_the_server_version() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:0\r\n";
        assert_eq!(parse_version(info), Some((7, 0)));
        assert_eq!(parse_version("redis_version:6.0.16\n"), Some((6, 0)));
        assert!(parse_version("redis_version:6.0.16\n").unwrap() < super::MIN_REDIS_VERSION);
        assert!(parse_version("redis_version:6.2.14\n").unwrap() < super::MIN_REDIS_VERSION);
        assert!(parse_version("redis_version:7.0.0\n").unwrap() >= super::MIN_REDIS_VERSION);
        assert_eq!(parse_version("# Server\r\n"), None);
    }
}
