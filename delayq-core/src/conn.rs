//! [`RedisConn`]: the one connection type of delayq (producer, runtime and test kit), and
//! running a topic's scripts on it with errors that say what to do.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::RedisError;

use crate::connect::{check_version, connect_error, open_client, UrlOrigin};
use crate::error::{redact_url, Error, Result};
use crate::keys::TopicKeys;

/// A command without an answer for this long counts as a dead connection: it fails, and the
/// connection is replaced. Large batches run as one script, so this is not tight.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// One attempt to open a connection (TCP, TLS, AUTH, HELLO) gives up after this long.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(3);

/// A reconnecting, multiplexed connection that also survives a peer that vanished without
/// closing the socket (a NAT or load balancer dropping idle flows): a command that gets no
/// answer within the response timeout fails, and the connection is replaced before the next
/// one. The `redis` crate's own manager reconnects only when the socket reports an error,
/// which a black-holed flow never does.
#[derive(Clone)]
pub struct RedisConn {
    shared: Arc<Shared>,
}

struct Shared {
    client: redis::Client,
    url: String,
    origin: UrlOrigin,
    /// The connection in use and a generation number, bumped on every replacement so that a
    /// burst of timeouts on one dead connection replaces it once.
    current: Mutex<(u64, ConnectionManager)>,
    replacing: tokio::sync::Mutex<()>,
}

impl fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConn")
            .field("url", &redact_url(&self.shared.url))
            .finish_non_exhaustive()
    }
}

fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(1))
}

impl RedisConn {
    /// Connects to `url`, which came from `origin`. It fails at once, with an error that
    /// names the (redacted) URL and where it came from, when Redis cannot be reached, refuses
    /// the credentials, or is older than [`MIN_REDIS_VERSION`].
    pub async fn connect(url: &str, origin: UrlOrigin) -> Result<Self> {
        let client = open_client(url)?;
        let mut manager = ConnectionManager::new_with_config(client.clone(), manager_config())
            .await
            .map_err(|source| connect_error(url, origin, source))?;
        check_version(&mut manager, url).await?;
        Ok(RedisConn {
            shared: Arc::new(Shared {
                client,
                url: url.to_string(),
                origin,
                current: Mutex::new((0, manager)),
                replacing: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The URL, with any password hidden.
    pub fn shown_url(&self) -> String {
        redact_url(&self.shared.url)
    }

    /// The URL as given (with its password), to open more connections such as a subscriber.
    pub fn url(&self) -> &str {
        &self.shared.url
    }

    /// Where the URL came from.
    pub fn origin(&self) -> UrlOrigin {
        self.shared.origin
    }

    /// The client behind it, for connections of other kinds (pub/sub).
    pub fn client(&self) -> &redis::Client {
        &self.shared.client
    }

    fn current(&self) -> (u64, ConnectionManager) {
        // A panic while holding this lock cannot leave the pair half-updated.
        self.shared
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs `call` on the current connection; when it times out (the peer is silent), the
    /// connection is replaced so that the next call does not wait on it again.
    pub async fn run<T, F, Fut>(&self, call: F) -> redis::RedisResult<T>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let (generation, conn) = self.current();
        let result = call(conn).await;
        if let Err(e) = &result {
            if e.is_timeout() {
                self.replace(generation).await;
            }
        }
        result
    }

    /// Replaces connection `generation` with a new one, unless someone already did.
    async fn replace(&self, generation: u64) {
        let _one_at_a_time = self.shared.replacing.lock().await;
        if self.current().0 != generation {
            return;
        }
        match ConnectionManager::new_with_config(self.shared.client.clone(), manager_config()).await
        {
            Ok(fresh) => {
                let mut current = self
                    .shared
                    .current
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                *current = (generation + 1, fresh);
                tracing::info!(
                    url = %self.shown_url(),
                    "Redis stopped answering on a connection; opened a new one"
                );
            }
            Err(error) => tracing::debug!(
                url = %self.shown_url(),
                %error,
                "Redis stopped answering and a new connection failed too; trying again on the next call"
            ),
        }
    }
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

/// Runs a script on the topic whose keys are `keys`; a failure is explained as above.
pub(crate) async fn invoke<T: redis::FromRedisValue>(
    conn: &RedisConn,
    keys: &TopicKeys,
    script: &redis::ScriptInvocation<'_>,
) -> Result<T> {
    match conn
        .run(|mut c| async move { script.invoke_async(&mut c).await })
        .await
    {
        Ok(v) => Ok(v),
        Err(e) => Err(explain(conn, keys, e).await),
    }
}
