//! Deleting a test's namespace when its runtime ends, on every primary of the deployment.

use std::time::Duration;

/// Deletes every key of `namespace` (best effort: a test's end must not fail on it), on every
/// primary of the deployment: the server, each primary of a cluster, or the primary the
/// sentinels name.
pub(super) fn delete_namespace(url: &str, namespace: &str) {
    use delayq_core::protocol::Deployment;
    let primaries: Vec<redis::ConnectionInfo> = match Deployment::parse(url) {
        Ok(Deployment::Single(one)) => {
            redis::IntoConnectionInfo::into_connection_info(one.as_str())
                .into_iter()
                .collect()
        }
        Ok(Deployment::Cluster(seeds)) => cluster_primaries(&seeds),
        Ok(Deployment::Sentinel(spec)) => sentinel_primary(&spec).into_iter().collect(),
        Err(_) => Vec::new(),
    };
    for info in primaries {
        let Ok(mut c) = redis::Client::open(info)
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        else {
            continue;
        };
        let pattern = format!("{namespace}:*");
        let keys: Vec<String> = match redis::Commands::scan_match::<_, String>(&mut c, &pattern) {
            Ok(iter) => iter.filter_map(|k| k.ok()).collect(),
            Err(_) => continue,
        };
        // One key a command: a cluster refuses a DEL across slots.
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.cmd("DEL").arg(key).ignore();
        }
        let _: redis::RedisResult<()> = pipe.query(&mut c);
    }
}

/// Every primary of a cluster, as the first seed that answers lists them (with the seed's
/// credentials and TLS).
fn cluster_primaries(seeds: &[String]) -> Vec<redis::ConnectionInfo> {
    for seed in seeds {
        let Ok(info) = redis::IntoConnectionInfo::into_connection_info(seed.as_str()) else {
            continue;
        };
        let Ok(mut c) = redis::Client::open(info.clone())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        else {
            continue;
        };
        let Ok(nodes) = redis::cmd("CLUSTER").arg("NODES").query::<String>(&mut c) else {
            continue;
        };
        return nodes
            .lines()
            .filter(|l| l.split(' ').nth(2).is_some_and(|f| f.contains("master")))
            .filter_map(|l| {
                let addr = l.split(' ').nth(1)?.split('@').next()?;
                let (host, port) = addr.rsplit_once(':')?;
                let host = if host.is_empty() { "127.0.0.1" } else { host };
                let node = match info.addr() {
                    redis::ConnectionAddr::TcpTls {
                        insecure,
                        tls_params,
                        ..
                    } => redis::ConnectionAddr::TcpTls {
                        host: host.to_string(),
                        port: port.parse().ok()?,
                        insecure: *insecure,
                        tls_params: tls_params.clone(),
                    },
                    _ => redis::ConnectionAddr::Tcp(host.to_string(), port.parse().ok()?),
                };
                Some(info.clone().set_addr(node))
            })
            .collect();
    }
    Vec::new()
}

/// The primary the first sentinel that answers names, with the data nodes' credentials.
fn sentinel_primary(spec: &delayq_core::protocol::SentinelSpec) -> Option<redis::ConnectionInfo> {
    for sentinel in &spec.sentinels {
        let Ok(mut c) = redis::Client::open(sentinel.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        else {
            continue;
        };
        let Ok((host, port)) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&spec.master)
            .query::<(String, u16)>(&mut c)
        else {
            continue;
        };
        let scheme = if spec.tls { "rediss" } else { "redis" };
        let auth = match (&spec.username, &spec.password) {
            (Some(u), Some(p)) => format!("{u}:{p}@"),
            (None, Some(p)) => format!(":{p}@"),
            _ => String::new(),
        };
        return redis::IntoConnectionInfo::into_connection_info(
            format!("{scheme}://{auth}{host}:{port}").as_str(),
        )
        .ok();
    }
    None
}
