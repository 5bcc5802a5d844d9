//! Addressing one node of a cluster: the primary serving a key, a command routed to it, and a
//! connection of its own to it (for `WAIT`, see replicated.rs).

use std::sync::Arc;

use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{IntoConnectionInfo, RedisError};

use super::backend::{open, AnyConn, Source, RESPONSE_TIMEOUT};
use super::conn::RedisConn;
use super::connect::open_client_at;
use crate::error::{Error, Result};

impl RedisConn {
    /// On a cluster: the address of the primary serving `key` now; `None` when this is not a
    /// cluster.
    pub(crate) async fn primary_of(&self, key: &str) -> Result<Option<String>> {
        let Source::Cluster { nodes, .. } = &*self.shared.source else {
            return Ok(None);
        };
        // Any node answers both (neither is routed by the key, so a stale slot map in the
        // cluster client does not matter): the key's slot, and who serves it.
        let slot = redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).clone();
        let (_, slot) = self.command_at_primary(key, slot).await?;
        let slot: u16 = redis::from_redis_value(slot).map_err(RedisError::from)?;
        let cmd = redis::cmd("CLUSTER").arg("NODES").clone();
        let (_, reply) = self.command_at_primary(key, cmd).await?;
        let text: String = redis::from_redis_value(reply).map_err(RedisError::from)?;
        let (host, port) = serving(&text, slot).ok_or_else(|| {
            Error::unexpected("finding the primary of a slot in CLUSTER NODES", &slot)
        })?;
        let host = if host.is_empty() {
            seed_host(nodes.first().map(String::as_str).unwrap_or_default())
        } else {
            host
        };
        Ok(Some(format!("{host}:{port}")))
    }

    /// On a cluster: a connection of its own to the node at `address` (from
    /// [`primary_of`](Self::primary_of)), as to a single server. Never a cluster connection:
    /// the cluster client sends its own slot refreshes and checks over its node connections,
    /// and a `WAIT` on one held them up for its whole timeout, so that after a failover it did
    /// not find the new primary until the response timeout.
    pub(crate) async fn to_node(&self, address: &str) -> Result<Self> {
        let Source::Cluster { nodes, .. } = &*self.shared.source else {
            return Err(Error::unexpected("a node connection", &"not a cluster"));
        };
        let (host, port) = address
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse().ok()?)))
            .ok_or_else(|| Error::unexpected("a node address", &address))?;
        let seed = nodes.first().map(String::as_str).unwrap_or_default();
        let source = Source::Single(open_client_at(seed, Some((host, port)))?);
        let conn = open(&source, RESPONSE_TIMEOUT).await?;
        Ok(RedisConn::over(
            Arc::new(source),
            RESPONSE_TIMEOUT,
            self.shared.url.clone(),
            conn,
        ))
    }

    /// Runs `cmd` on the connection to the primary serving `key` (on a single server or a
    /// Sentinel primary: the one connection), and says which generation of this connection
    /// ran it.
    pub(crate) async fn command_at_primary(
        &self,
        key: &str,
        cmd: redis::Cmd,
    ) -> redis::RedisResult<(u64, redis::Value)> {
        let key = key.to_string();
        self.run_at(|conn| async move {
            match conn {
                AnyConn::Single(mut c) => cmd.query_async(&mut c).await,
                AnyConn::Direct(mut c) => cmd.query_async(&mut c).await,
                AnyConn::Cluster(mut c) => {
                    let route = Route::with_key(key.as_bytes(), SlotAddr::Master);
                    let routing =
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                    c.route_command(cmd, routing).await
                }
            }
        })
        .await
    }
}

/// The address of the primary serving `slot` in a `CLUSTER NODES` reply (lines `id
/// host:port@bus[,name] flags primary ping pong epoch link slot-ranges…`).
fn serving(nodes: &str, slot: u16) -> Option<(String, u16)> {
    let line = nodes.lines().find(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let primary = fields.get(2).is_some_and(|flags| {
            let flags: Vec<&str> = flags.split(',').collect();
            flags.contains(&"master") && !flags.iter().any(|f| f.starts_with("fail"))
        });
        primary
            && fields.iter().skip(8).any(|range| {
                let (from, to) = range.split_once('-').unwrap_or((range, range));
                matches!((from.parse::<u16>(), to.parse::<u16>()), (Ok(a), Ok(b)) if (a..=b).contains(&slot))
            })
    })?;
    let addr = line.split(' ').nth(1)?.split(['@', ',']).next()?;
    let (host, port) = addr.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?))
}

/// The host of a seed URL, for a node that does not know its own address.
fn seed_host(seed: &str) -> String {
    seed.into_connection_info()
        .ok()
        .and_then(|info| match info.addr() {
            redis::ConnectionAddr::Tcp(host, _) => Some(host.clone()),
            redis::ConnectionAddr::TcpTls { host, .. } => Some(host.clone()),
            _ => None,
        })
        .unwrap_or_else(|| "127.0.0.1".to_string())
}
