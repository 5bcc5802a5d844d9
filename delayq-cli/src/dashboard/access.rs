//! Who reaches the dashboard: a request must name it in `Host` (the listen address,
//! `localhost`, or an `--allow-host` name), so a page whose name was re-pointed at this
//! machine (DNS rebinding) is refused; a write from another site is refused; with `--token`,
//! every API call needs the bearer token.

use std::net::{IpAddr, SocketAddr};

use axum::extract::Request;
use axum::http::{header, HeaderMap, Method, StatusCode};

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
        // Sent twice (by a proxy that adds one), a Host names nothing.
        let host = one(headers, header::HOST.as_str()).ok().flatten();
        if !host.is_some_and(|h| self.names(bound, h)) {
            return Some((
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "this dashboard answers to {bound} and localhost only; start it with --allow-host NAME to reach it by another name"
                ),
            ));
        }
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
            if let Some(why) = self.foreign_write(bound, host.unwrap_or_default(), headers) {
                return Some((StatusCode::FORBIDDEN, why));
            }
        }
        None
    }

    /// Why a write is not from this dashboard's own page, as the browser tells: a
    /// `Sec-Fetch-Site` other than `same-origin` (or `none`, typed by the user), or, when
    /// the browser sent no `same-origin`, an `Origin` that is not the page's: `http://` and
    /// the request's own `Host` (the page reached directly), or `http://` or `https://` and
    /// an `--allow-host` name (a reverse proxy, which may speak HTTPS and rewrite `Host`; a
    /// name given without a port matches without one or on the port this dashboard listens
    /// on). Another port or scheme of the same machine is another site. A header sent twice
    /// is refused. A request without either header is no browser's (scripts and `curl` send
    /// none), which the confirmation and the token bound.
    fn foreign_write(&self, bound: SocketAddr, host: &str, headers: &HeaderMap) -> Option<String> {
        let refused = |why: &str| {
            let mut own = vec![bound.to_string(), "localhost".to_string()];
            own.extend(self.allow_hosts.iter().cloned());
            format!(
                "a write must come from this dashboard's own page (http:// or https:// on {}); this one has {why}",
                own.join(", ")
            )
        };
        let (Ok(site), Ok(origin)) = (one(headers, "sec-fetch-site"), one(headers, "origin"))
        else {
            return Some(refused(
                "Origin or Sec-Fetch-Site sent twice, or not as text",
            ));
        };
        match site {
            Some("same-origin") => return None,
            Some("none") | None => {}
            Some(other) => return Some(refused(&format!("Sec-Fetch-Site: {other}"))),
        }
        let origin = origin?;
        let lower = origin.to_ascii_lowercase();
        let (secure, authority) = match lower.strip_prefix("https://") {
            Some(a) => (true, Some(a)),
            None => (false, lower.strip_prefix("http://")),
        };
        let own = authority.is_some_and(|a| {
            !a.is_empty()
                && !a.contains(['/', '@', '?', '#'])
                && ((!secure && a.eq_ignore_ascii_case(host)) || self.proxied(bound, a))
        });
        if own {
            None
        } else {
            Some(refused(&format!("Origin: {origin}")))
        }
    }

    /// Whether `authority` (lower-cased `name[:port]`) is an `--allow-host` name: as given,
    /// or a name given without a port, with none or with the port this dashboard listens on.
    fn proxied(&self, bound: SocketAddr, authority: &str) -> bool {
        if self.allow_hosts.iter().any(|a| a == authority) {
            return true;
        }
        let (name, port) = split_host(authority);
        port.is_none_or(|p| p == bound.port()) && self.allow_hosts.iter().any(|a| a == name)
    }
}

/// The one value of header `name` (lower-cased), `None` when absent; `Err` when it is sent
/// more than once or is not text.
fn one<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, ()> {
    let mut all = headers.get_all(name).iter();
    match (all.next(), all.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => v.to_str().map(|v| Some(v.trim())).map_err(|_| ()),
        (Some(_), Some(_)) => Err(()),
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
