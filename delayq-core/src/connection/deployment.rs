//! The three Redis deployments one `DELAYQ_REDIS_URL` can name: a single server, a Redis
//! Cluster (comma-separated seed nodes), or a Sentinel-managed primary
//! (`redis+sentinel://host:port,host:port/MASTER_NAME`).

use crate::error::{Error, Result};
use crate::redact::redact_url;

/// What a Redis URL points delayq at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deployment {
    /// One server: `redis://` or `rediss://`.
    Single(String),
    /// Redis Cluster seed nodes, each a `redis://` or `rediss://` URL.
    Cluster(Vec<String>),
    /// A primary found through Sentinel.
    Sentinel(SentinelSpec),
}

/// `redis+sentinel://[user:password@]host:port[,host:port…]/MASTER_NAME`. The credentials
/// are the data nodes' (the primary and its replicas); sentinels are asked without them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelSpec {
    /// `redis://host:port` of each sentinel.
    pub sentinels: Vec<String>,
    /// The monitored primary's name.
    pub master: String,
    /// The data nodes' user, if any.
    pub username: Option<String>,
    /// The data nodes' password, if any.
    pub password: Option<String>,
    /// `rediss+sentinel://`: TLS to the data nodes and the sentinels.
    pub tls: bool,
}

fn invalid(url: &str, reason: impl Into<String>) -> Error {
    Error::InvalidUrl {
        url: redact_url(url),
        reason: reason.into(),
    }
}

impl Deployment {
    /// Reads a `DELAYQ_REDIS_URL`-style string.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`](crate::Error::InvalidUrl) saying what is wrong with it.
    pub fn parse(url: &str) -> Result<Deployment> {
        let url = url.trim();
        for scheme in ["redis+sentinel://", "rediss+sentinel://"] {
            if let Some(rest) = url.strip_prefix(scheme) {
                return parse_sentinel(url, rest, scheme.starts_with("rediss"))
                    .map(Deployment::Sentinel);
            }
        }
        if url.contains(',') {
            let nodes: Vec<String> = url
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect();
            if nodes.is_empty() {
                return Err(invalid(url, "no cluster node in the list"));
            }
            if let Some(bad) = nodes
                .iter()
                .find(|n| !n.starts_with("redis://") && !n.starts_with("rediss://"))
            {
                return Err(invalid(
                    url,
                    format!(
                        "cluster node {:?} is not a redis:// or rediss:// URL",
                        redact_url(bad)
                    ),
                ));
            }
            return Ok(Deployment::Cluster(nodes));
        }
        Ok(Deployment::Single(url.to_string()))
    }
}

fn parse_sentinel(url: &str, rest: &str, tls: bool) -> Result<SentinelSpec> {
    let (authority, master) = rest
        .rsplit_once('/')
        .ok_or_else(|| invalid(url, "no primary name: end the URL with /MASTER_NAME"))?;
    let master = master.trim();
    if master.is_empty() {
        return Err(invalid(
            url,
            "no primary name: end the URL with /MASTER_NAME",
        ));
    }
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, authority),
    };
    let (username, password) = match userinfo {
        None => (None, None),
        Some(info) => match info.split_once(':') {
            Some((user, pass)) => (
                (!user.is_empty()).then(|| user.to_string()),
                Some(pass.to_string()),
            ),
            None => (None, Some(info.to_string())),
        },
    };
    let scheme = if tls { "rediss" } else { "redis" };
    let sentinels: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| format!("{scheme}://{h}"))
        .collect();
    if sentinels.is_empty() {
        return Err(invalid(
            url,
            "no sentinel host:port before the primary name",
        ));
    }
    Ok(SentinelSpec {
        sentinels,
        master: master.to_string(),
        username,
        password,
        tls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_three_forms() {
        assert_eq!(
            Deployment::parse("redis://127.0.0.1:6379").unwrap(),
            Deployment::Single("redis://127.0.0.1:6379".into())
        );
        assert_eq!(
            Deployment::parse("redis://a:7000, redis://b:7000").unwrap(),
            Deployment::Cluster(vec!["redis://a:7000".into(), "redis://b:7000".into()])
        );
        let Deployment::Sentinel(s) =
            Deployment::parse("redis+sentinel://app:pw@h1:26379,h2:26380/mymaster").unwrap()
        else {
            panic!("not sentinel");
        };
        assert_eq!(s.sentinels, ["redis://h1:26379", "redis://h2:26380"]);
        assert_eq!(s.master, "mymaster");
        assert_eq!(
            (s.username.as_deref(), s.password.as_deref()),
            (Some("app"), Some("pw"))
        );
    }

    #[test]
    fn says_what_is_wrong() {
        for (bad, why) in [
            ("redis+sentinel://h1:26379", "primary name"),
            ("redis+sentinel://h1:26379/", "primary name"),
            ("redis+sentinel:///mymaster", "sentinel"),
            ("redis://a:7000,http://b:7000", "not a redis://"),
        ] {
            let err = Deployment::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
