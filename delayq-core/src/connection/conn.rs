//! [`RedisConn`]: the one connection type of delayq (producer, runtime and test kit) for the
//! three deployments: opening it, replacing it when it fails, and siblings of it.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::RedisError;

use super::backend::{
    cluster_builder, invalid, open, sentinel_client, AnyConn, Source, BLOCKING_RESPONSE_TIMEOUT,
    RESPONSE_TIMEOUT,
};
use super::connect::{check_version, connect_error, open_client};
use super::deployment::Deployment;
use crate::env::UrlOrigin;
use crate::error::Result;
use crate::redact::redact_url;

/// A reconnecting, multiplexed connection to a single server, a Redis Cluster or a
/// Sentinel-managed primary, that also survives a peer that vanished without closing the
/// socket (a NAT or load balancer dropping idle flows): a command that gets no answer within
/// the response timeout fails, and the connection is replaced before the next one. The
/// `redis` crate's own managers reconnect only when the socket reports an error, which a
/// black-holed flow never does. On Sentinel, a failed connection also asks the sentinels for
/// the primary again, so a failover is followed without a restart.
#[derive(Clone)]
pub struct RedisConn {
    pub(super) shared: Arc<Shared>,
}

pub(super) struct Shared {
    pub(super) source: Arc<Source>,
    /// How long a command may go unanswered before the connection counts as dead.
    response_timeout: Duration,
    pub(super) url: String,
    /// The connection in use and a generation number, bumped on every replacement so that a
    /// burst of failures on one dead connection replaces it once.
    current: Mutex<(u64, AnyConn)>,
    /// Held by the one replacement under way.
    pub(super) replacing: Arc<tokio::sync::Mutex<()>>,
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
    ///
    /// # Errors
    /// [`Error::InvalidUrl`](crate::Error::InvalidUrl), [`Error::Connect`](crate::Error::Connect)
    /// (naming where the URL came from), [`Error::Auth`](crate::Error::Auth),
    /// [`Error::Tls`](crate::Error::Tls) or [`Error::RedisTooOld`](crate::Error::RedisTooOld).
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

    pub(super) fn over(
        source: Arc<Source>,
        response_timeout: Duration,
        url: String,
        conn: AnyConn,
    ) -> Self {
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
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
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

    pub(crate) fn current(&self) -> (u64, AnyConn) {
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
    ///
    /// # Errors
    /// Redis' error, after the retries a cluster's redirections and failovers allow.
    pub async fn run<T, F, Fut>(&self, call: F) -> redis::RedisResult<T>
    where
        F: FnOnce(AnyConn) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        self.run_at(call).await.map(|(_, value)| value)
    }

    /// [`run`](Self::run), saying which generation of this connection ran `call`.
    pub(super) async fn run_at<T, F, Fut>(&self, call: F) -> redis::RedisResult<(u64, T)>
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
    pub(super) async fn replace(&self, generation: u64) {
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
}
