//! Who reaches the dashboard: a request must name it in `Host` (the listen address,
//! `localhost`, or an `--allow-host` name), so a page whose name was re-pointed at this
//! machine (DNS rebinding) is refused; a write from another site is refused; with `--token`,
//! every API call needs the bearer token.

use std::net::{IpAddr, SocketAddr};

use axum::extract::Request;
use axum::http::{header, Method, StatusCode};

use crate::failure::Failure;

/// Who may do what: writes on or off, the extra host names, the API token.
pub(crate) struct Access {
    writes: bool,
    /// Lower-cased, as given (`name` or `name:port`).
    allow_hosts: Vec<String>,
    pub(super) token: Option<String>,
}

impl Access {
    pub(crate) fn new(
        writes: bool,
        allow_hosts: Vec<String>,
        token: Option<String>,
    ) -> Result<Self, Failure> {
        if let Some(bad) = allow_hosts
            .iter()
            .find(|h| h.is_empty() || h.contains(['/', ' ', '@']))
        {
            return Err(Failure::Usage(format!(
                "--allow-host {bad:?} is not a host name (give NAME or NAME:PORT)"
            )));
        }
        if token.as_deref().is_some_and(|t| t.len() < 16) {
            return Err(Failure::Usage(
                "the dashboard token is too short: use at least 16 characters (for example `openssl rand -hex 16`)".into(),
            ));
        }
        Ok(Access {
            writes,
            allow_hosts: allow_hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            token,
        })
    }

    /// Whether writes are on.
    pub(crate) fn writes(&self) -> bool {
        self.writes
    }

    /// Whether `host` (a `Host` header) names this dashboard: an `--allow-host` name, or,
    /// on the port it listens on (or none), the IP it listens on (any IP when it listens on
    /// all of them) or `localhost` when that reaches it. A rebinding attack's page always
    /// names its own domain, so it never passes.
    fn names(&self, bound: SocketAddr, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        if self.allow_hosts.contains(&host) {
            return true;
        }
        let (name, port) = split_host(&host);
        if port.is_some_and(|p| p != bound.port()) {
            return false;
        }
        if self.allow_hosts.iter().any(|a| a == name) {
            return true;
        }
        let ip = bound.ip();
        match name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            Ok(named) => ip.is_unspecified() || named == ip,
            Err(_) => name == "localhost" && (ip.is_loopback() || ip.is_unspecified()),
        }
    }

    /// Why `request` must not reach the routes of a dashboard listening on `bound`: a foreign
    /// `Host`, an API call without the token, a write from another site.
    pub(super) fn refusal(
        &self,
        bound: SocketAddr,
        request: &Request,
    ) -> Option<(StatusCode, String)> {
        let headers = request.headers();
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        let Some(host) = host.filter(|h| self.names(bound, h)) else {
            return Some((
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "this dashboard answers to {bound} and localhost only; start it with --allow-host NAME to reach it by another name"
                ),
            ));
        };
        if !request.uri().path().starts_with("/api/") {
            return None;
        }
        if let Some(token) = &self.token {
            let given = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            if !given.is_some_and(|g| same_secret(g.as_bytes(), token.as_bytes())) {
                return Some((
                    StatusCode::UNAUTHORIZED,
                    "this dashboard needs its token: Authorization: Bearer <token> (--token / DELAYQ_DASHBOARD_TOKEN)".into(),
                ));
            }
        }
        if request.method() != Method::GET && request.method() != Method::HEAD {
            let own = format!("http://{host}");
            let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
            let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
            let foreign_origin = origin.is_some_and(|o| !o.eq_ignore_ascii_case(&own));
            let foreign_site = site.is_some_and(|s| s != "same-origin" && s != "none");
            if foreign_origin || foreign_site {
                return Some((
                    StatusCode::FORBIDDEN,
                    format!("a write must come from this dashboard's own page ({own})"),
                ));
            }
        }
        None
    }
}

/// `host[:port]` or `[v6][:port]` into the name and the port, if any.
fn split_host(host: &str) -> (&str, Option<u16>) {
    let colon = if host.starts_with('[') {
        host.find(']')
            .and_then(|end| host[end..].find(':').map(|c| end + c))
    } else {
        host.rfind(':')
    };
    match colon {
        Some(c) => match host[c + 1..].parse() {
            Ok(port) => (&host[..c], Some(port)),
            Err(_) => (host, None),
        },
        None => (host, None),
    }
}

/// Compares without stopping at the first difference, so timing does not tell how much of a
/// guess was right.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}
