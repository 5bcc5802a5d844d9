//! [`RedisConn`]: the one connection type of delayq (producer, runtime and test kit) for the
//! three deployments, and running a topic's scripts on it with errors that say what to do.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{IntoConnectionInfo, RedisError};

pub use crate::backend::AnyConn;
use crate::backend::{
    cluster_builder, invalid, open, sentinel_client, Source, BLOCKING_RESPONSE_TIMEOUT,
    RESPONSE_TIMEOUT,
};
use crate::connect::{check_version, connect_error, open_client, open_client_at, UrlOrigin};
use crate::deployment::Deployment;
use crate::error::{redact_url, Error, Result};
use crate::keys::TopicKeys;

/// A reconnecting, multiplexed connection to a single server, a Redis Cluster or a
/// Sentinel-managed primary, that also survives a peer that vanished without closing the
/// socket (a NAT or load balancer dropping idle flows): a command that gets no answer within
/// the response timeout fails, and the connection is replaced before the next one. The
/// `redis` crate's own managers reconnect only when the socket reports an error, which a
/// black-holed flow never does. On Sentinel, a failed connection also asks the sentinels for
/// the primary again, so a failover is followed without a restart.
#[derive(Clone)]
pub struct RedisConn {
    shared: Arc<Shared>,
}

struct Shared {
    source: Arc<Source>,
    /// How long a command may go unanswered before the connection counts as dead.
    response_timeout: Duration,
    url: String,
    /// The connection in use and a generation number, bumped on every replacement so that a
    /// burst of failures on one dead connection replaces it once.
    current: Mutex<(u64, AnyConn)>,
    /// Held by the one replacement under way.
    replacing: Arc<tokio::sync::Mutex<()>>,
}

impl fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConn")
            .field("url", &redact_url(&self.shared.url))
            .finish_non_exhaustive()
    }
}

impl RedisConn {
    /// Connects to `url` (one server, comma-separated cluster seeds, or
    /// `redis+sentinel://…/MASTER`), which came from `origin`. It fails at once, with an
    /// error that names the (redacted) URL and where it came from, when Redis cannot be
    /// reached, refuses the credentials, or is older than [`crate::MIN_REDIS_VERSION`].
    pub async fn connect(url: &str, origin: UrlOrigin) -> Result<Self> {
        let source = match Deployment::parse(url)? {
            Deployment::Single(single) => Source::Single(open_client(&single)?),
            Deployment::Sentinel(spec) => {
                Source::Sentinel(tokio::sync::Mutex::new(sentinel_client(url, &spec)?))
            }
            Deployment::Cluster(nodes) => {
                let client = cluster_builder(url, &nodes)?
                    .build()
                    .map_err(invalid(url))?;
                let blocking = Box::new(
                    cluster_builder(url, &nodes)?
                        .response_timeout(BLOCKING_RESPONSE_TIMEOUT)
                        .build()
                        .map_err(invalid(url))?,
                );
                // The version is read from the first seed node that answers.
                let mut last_error = None;
                for node in &nodes {
                    match open_client(node)?.get_multiplexed_async_connection().await {
                        Ok(mut seed) => {
                            check_version(&mut seed, url).await?;
                            last_error = None;
                            break;
                        }
                        Err(e) => last_error = Some(e),
                    }
                }
                if let Some(source) = last_error {
                    return Err(connect_error(url, origin, source));
                }
                Source::Cluster {
                    client,
                    blocking,
                    nodes,
                }
            }
        };
        let mut conn = open(&source, RESPONSE_TIMEOUT)
            .await
            .map_err(|source| connect_error(url, origin, source))?;
        if !matches!(conn, AnyConn::Cluster(_)) {
            check_version(&mut conn, url).await?;
        }
        Ok(RedisConn::over(
            Arc::new(source),
            RESPONSE_TIMEOUT,
            url.to_string(),
            conn,
        ))
    }

    fn over(source: Arc<Source>, response_timeout: Duration, url: String, conn: AnyConn) -> Self {
        RedisConn {
            shared: Arc::new(Shared {
                source,
                response_timeout,
                url,
                current: Mutex::new((0, conn)),
                replacing: Arc::default(),
            }),
        }
    }

    /// A connection of its own to the same deployment, for blocking reads (`XREADGROUP …
    /// BLOCK`): a blocked command would hold up every other command of a shared multiplexed
    /// connection, and a block may last longer than the usual response timeout.
    pub async fn for_blocking(&self) -> Result<Self> {
        self.sibling(BLOCKING_RESPONSE_TIMEOUT).await
    }

    /// A connection of its own to the same deployment with the usual response timeout, for
    /// commands that block it briefly (`WAIT`) and must not hold up anyone else.
    pub(crate) async fn of_its_own(&self) -> Result<Self> {
        self.sibling(RESPONSE_TIMEOUT).await
    }

    /// Runs `pipe` on a connection to one server (not a cluster), and says which generation
    /// of this connection ran it.
    pub(crate) async fn pipeline_on(
        &self,
        pipe: redis::Pipeline,
    ) -> redis::RedisResult<(u64, Vec<redis::Value>)> {
        self.run_at(|conn| async move {
            match conn {
                AnyConn::Single(mut c) => pipe.query_async(&mut c).await,
                AnyConn::Direct(mut c) => pipe.query_async(&mut c).await,
                AnyConn::Cluster(_) => Err(RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "a pipeline to one server, on a cluster connection",
                ))),
            }
        })
        .await
    }

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

    async fn sibling(&self, response_timeout: Duration) -> Result<Self> {
        let conn = open(&self.shared.source, response_timeout).await?;
        Ok(RedisConn::over(
            self.shared.source.clone(),
            response_timeout,
            self.shared.url.clone(),
            conn,
        ))
    }

    /// The longest block a blocking read on [`for_blocking`](Self::for_blocking)'s connection
    /// may ask for: well inside its response timeout.
    pub fn max_block(&self) -> Duration {
        self.shared
            .response_timeout
            .saturating_sub(Duration::from_secs(15))
    }

    /// The URL, with any password hidden.
    pub fn shown_url(&self) -> String {
        redact_url(&self.shared.url)
    }

    /// Whether this is a Redis Cluster (wake-ups are then sharded: `SPUBLISH`/`SSUBSCRIBE`).
    pub fn is_cluster(&self) -> bool {
        matches!(*self.shared.source, Source::Cluster { .. })
    }

    /// The keys of `topic` under `namespace`, published the way this deployment needs.
    pub fn topic_keys(&self, namespace: &str, topic: &str) -> Result<TopicKeys> {
        Ok(TopicKeys::new(namespace, topic)?.sharded(self.is_cluster()))
    }

    /// A client for a plain pub/sub connection: the server, or the current Sentinel primary.
    /// `None` on a cluster, whose wake-ups go through [`cluster_subscriber`](Self::cluster_subscriber).
    pub async fn pubsub_client(&self) -> Option<redis::RedisResult<redis::Client>> {
        match &*self.shared.source {
            Source::Single(client) => Some(Ok(client.clone())),
            Source::Sentinel(sentinel) => Some(sentinel.lock().await.async_get_client().await),
            Source::Cluster { .. } => None,
        }
    }

    /// On a cluster: a RESP3 cluster connection of its own whose pushes (sharded messages,
    /// and re-subscriptions after a failover or slot move) go to `pushes`. It subscribes
    /// again by itself wherever the slots move.
    pub async fn cluster_subscriber(
        &self,
        pushes: tokio::sync::mpsc::UnboundedSender<redis::PushInfo>,
    ) -> Option<redis::RedisResult<ClusterConnection>> {
        let Source::Cluster { nodes, .. } = &*self.shared.source else {
            return None;
        };
        let builder = match cluster_builder(&self.shared.url, nodes) {
            Ok(builder) => builder,
            Err(e) => {
                return Some(Err(RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "cluster seed nodes",
                    e.to_string(),
                ))))
            }
        };
        let client = builder
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(pushes)
            .build();
        Some(match client {
            Ok(client) => client.get_async_connection().await,
            Err(e) => Err(e),
        })
    }

    fn current(&self) -> (u64, AnyConn) {
        // A panic while holding this lock cannot leave the pair half-updated.
        self.shared
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs `call` on the current connection; when it fails in a way a new connection can
    /// mend (a silent peer; on Sentinel also a dead or demoted primary), a replacement is
    /// started so that the next call does not meet it again. The failed call returns its
    /// error at once: the replacement runs in the background, one at a time, so that in an
    /// outage no call waits for reopens (a call fails within the response timeout), and the
    /// callers that failed together start one reopen, not one each in turn.
    pub async fn run<T, F, Fut>(&self, call: F) -> redis::RedisResult<T>
    where
        F: FnOnce(AnyConn) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        self.run_at(call).await.map(|(_, value)| value)
    }

    /// [`run`](Self::run), saying which generation of this connection ran `call`.
    async fn run_at<T, F, Fut>(&self, call: F) -> redis::RedisResult<(u64, T)>
    where
        F: FnOnce(AnyConn) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let (generation, conn) = self.current();
        let result = call(conn).await;
        if let Err(e) = &result {
            if self.worth_replacing(e) {
                self.replace_in_background(generation);
            }
        }
        result.map(|value| (generation, value))
    }

    fn worth_replacing(&self, e: &RedisError) -> bool {
        if e.is_timeout() {
            return true;
        }
        // On Sentinel any failure but a plain error reply (WRONGTYPE, NOSCRIPT, …) may mean
        // the primary is gone or demoted (it then refuses writes with READONLY): ask the
        // sentinels again. The connection never reconnects by itself (see `AnyConn::Direct`).
        matches!(*self.shared.source, Source::Sentinel(_))
            && (!matches!(e.kind(), redis::ErrorKind::Server(_))
                || matches!(e.code(), Some("READONLY" | "MASTERDOWN" | "LOADING")))
    }

    /// Starts replacing connection `generation` with a new one, unless it was replaced
    /// already or a replacement is under way (which serves this failure too).
    fn replace_in_background(&self, generation: u64) {
        let Ok(one_at_a_time) = self.shared.replacing.clone().try_lock_owned() else {
            return;
        };
        if self.current().0 != generation {
            return;
        }
        let conn = self.clone();
        tokio::spawn(async move {
            conn.replace(generation).await;
            drop(one_at_a_time);
        });
    }

    /// Replaces connection `generation` with a new one (the caller holds `replacing`).
    async fn replace(&self, generation: u64) {
        match open(&self.shared.source, self.shared.response_timeout).await {
            Ok(fresh) => {
                let mut current = self
                    .shared
                    .current
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                *current = (generation + 1, fresh);
                tracing::info!(
                    url = %self.shown_url(),
                    "a Redis connection failed; opened a new one"
                );
            }
            Err(error) => tracing::debug!(
                url = %self.shown_url(),
                %error,
                "a Redis connection failed and a new one failed too; trying again on the next call"
            ),
        }
    }

    /// Runs a prepared script call (`run` with the script's own error).
    pub(crate) async fn run_script<T: redis::FromRedisValue>(
        &self,
        script: redis::ScriptInvocation<'static>,
    ) -> Result<T> {
        Ok(self
            .run(|mut c| async move { script.invoke_async(&mut c).await })
            .await?)
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

/// Runs `call` (commands on the topic whose keys are `keys`) on `conn`; a failure is
/// explained as above.
pub(crate) async fn on_topic<T, F, Fut>(conn: &RedisConn, keys: &TopicKeys, call: F) -> Result<T>
where
    F: FnOnce(AnyConn) -> Fut,
    Fut: std::future::Future<Output = redis::RedisResult<T>>,
{
    match conn.run(call).await {
        Ok(v) => Ok(v),
        Err(e) => Err(explain(conn, keys, e).await),
    }
}

/// Runs a script on the topic whose keys are `keys`; a failure is explained as above.
pub(crate) async fn invoke<T: redis::FromRedisValue>(
    conn: &RedisConn,
    keys: &TopicKeys,
    script: &redis::ScriptInvocation<'_>,
) -> Result<T> {
    on_topic(conn, keys, |mut c| async move {
        script.invoke_async(&mut c).await
    })
    .await
}
