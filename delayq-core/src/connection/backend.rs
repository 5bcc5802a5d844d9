//! The connections behind [`crate::protocol::RedisConn`] for each deployment: where they come
//! from (a client, the sentinels, a cluster client) and how one is opened.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Cmd, IntoConnectionInfo, Pipeline, RedisError, RedisFuture, Value};

use super::connect::{tcp_settings, tls_certificates};
use super::deployment::SentinelSpec;
use crate::error::{Error, Result};
use crate::redact::redact_url;

/// A command without an answer for this long counts as a dead connection: it fails, and the
/// connection is replaced. Large batches run as one script, so this is not tight.
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// The response timeout of a connection opened for blocking reads: longer than the longest
/// block delayq asks for (`XREADGROUP … BLOCK`), so that only a silent peer trips it.
pub(crate) const BLOCKING_RESPONSE_TIMEOUT: Duration = Duration::from_secs(75);
/// One attempt to open a connection (TCP, TLS, AUTH, HELLO) gives up after this long.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(3);
/// On a cluster, a command that met a dead node, `TRYAGAIN` or `CLUSTERDOWN` is retried
/// after a wait between these two (milliseconds; jittered, growing with each retry), all
/// within the response timeout. The `redis` crate's default starts at 1.28 s, so after a
/// failover a command waited that long before it even looked at the new primary.
const CLUSTER_RETRY_WAIT_MS: (u64, u64) = (50, 500);
/// Enough retries at those waits to span the response timeout, which ends them: a command
/// sent as a primary dies waits for its replica's promotion (about 2 × `cluster-node-timeout`)
/// instead of failing with `CLUSTERDOWN` after a second or two.
const CLUSTER_RETRIES: u32 = 64;

/// A connection to any of the deployments; scripts and pipelines run on it alike (the
/// cluster connection routes each by its first key and follows `MOVED`/`ASK`).
#[derive(Clone)]
pub enum AnyConn {
    /// A single server: reconnects to the same address by itself.
    Single(ConnectionManager),
    /// The primary the sentinels named. It never reconnects by itself: an old primary that
    /// comes back at the same address after a failover would take writes that the next
    /// resync then throws away; a failed connection is replaced by asking the sentinels again.
    Direct(redis::aio::MultiplexedConnection),
    /// Redis Cluster.
    Cluster(ClusterConnection),
}

impl ConnectionLike for AnyConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            AnyConn::Single(c) => c.req_packed_command(cmd),
            AnyConn::Direct(c) => c.req_packed_command(cmd),
            AnyConn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            AnyConn::Single(c) => c.req_packed_commands(cmd, offset, count),
            AnyConn::Direct(c) => c.req_packed_commands(cmd, offset, count),
            AnyConn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            AnyConn::Single(c) => c.get_db(),
            AnyConn::Direct(c) => c.get_db(),
            AnyConn::Cluster(c) => c.get_db(),
        }
    }
}

/// Where connections come from.
pub(crate) enum Source {
    Single(redis::Client),
    /// The sentinels, asked for the current primary on every (re)connect.
    Sentinel(tokio::sync::Mutex<SentinelClient>),
    Cluster {
        client: ClusterClient,
        /// The same nodes with [`BLOCKING_RESPONSE_TIMEOUT`], for blocking reads.
        blocking: Box<ClusterClient>,
        /// The seed nodes, to build the wake-up subscriber's own (RESP3) cluster connection.
        nodes: Vec<String>,
    },
}

fn manager_config(response_timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
        .set_response_timeout(Some(response_timeout))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(1))
}

pub(crate) fn invalid(url: &str) -> impl Fn(RedisError) -> Error + '_ {
    move |e| Error::InvalidUrl {
        url: redact_url(url),
        reason: e.to_string(),
    }
}

pub(crate) fn cluster_builder(url: &str, nodes: &[String]) -> Result<ClusterClientBuilder> {
    let infos = nodes
        .iter()
        .map(|n| n.as_str().into_connection_info())
        .collect::<redis::RedisResult<Vec<_>>>()
        .map_err(invalid(url))?;
    let mut builder = ClusterClientBuilder::new(infos)
        .connection_timeout(CONNECTION_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .retries(CLUSTER_RETRIES)
        .min_retry_wait(CLUSTER_RETRY_WAIT_MS.0)
        .max_retry_wait(CLUSTER_RETRY_WAIT_MS.1)
        .tcp_settings(tcp_settings());
    if let Some(certs) = tls_certificates(url)? {
        builder = builder.certs(certs);
    }
    Ok(builder)
}

pub(crate) fn sentinel_client(url: &str, spec: &SentinelSpec) -> Result<SentinelClient> {
    let addrs = spec
        .sentinels
        .iter()
        .map(|s| s.as_str().into_connection_info().map(|i| i.addr().clone()))
        .collect::<redis::RedisResult<Vec<_>>>()
        .map_err(invalid(url))?;
    let mut builder = SentinelClientBuilder::new(addrs, &spec.master, SentinelServerType::Master)
        .map_err(invalid(url))?
        .set_client_to_redis_tcp_settings(tcp_settings())
        .set_client_to_sentinel_tcp_settings(tcp_settings());
    if let Some(user) = &spec.username {
        builder = builder.set_client_to_redis_username(user);
    }
    if let Some(password) = &spec.password {
        builder = builder.set_client_to_redis_password(password);
    }
    if spec.tls {
        builder = builder
            .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
            .set_client_to_sentinel_tls_mode(redis::TlsMode::Secure);
        if let Some(certs) = tls_certificates(url)? {
            builder = builder.set_client_to_redis_certificates(certs);
        }
    }
    builder.build().map_err(invalid(url))
}

/// Opens a connection from `source` whose commands fail after `response_timeout` without an
/// answer ([`RESPONSE_TIMEOUT`] or [`BLOCKING_RESPONSE_TIMEOUT`]).
pub(crate) async fn open(
    source: &Source,
    response_timeout: Duration,
) -> redis::RedisResult<AnyConn> {
    match source {
        Source::Single(client) => {
            ConnectionManager::new_with_config(client.clone(), manager_config(response_timeout))
                .await
                .map(AnyConn::Single)
        }
        Source::Sentinel(sentinel) => {
            let client = sentinel.lock().await.async_get_client().await?;
            let config = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(CONNECTION_TIMEOUT))
                .set_response_timeout(Some(response_timeout));
            client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map(AnyConn::Direct)
        }
        Source::Cluster {
            client, blocking, ..
        } => {
            let client = if response_timeout == RESPONSE_TIMEOUT {
                client
            } else {
                blocking
            };
            client.get_async_connection().await.map(AnyConn::Cluster)
        }
    }
}
