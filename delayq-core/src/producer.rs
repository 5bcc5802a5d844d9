//! The [`Producer`]: a handle on one namespace over one connection, cheap to clone. Each system
//! adds its calls in its own folder (`delay/send.rs`, `stream/publish.rs`, …); here are only
//! connecting, the namespace and the payload limit.

use std::sync::Arc;

use serde::Serialize;

use crate::catalog::{Catalog, Registered};
use crate::connection::{RedisConn, Replicated};
use crate::error::{Error, Result};
use crate::names::{validate_name, validate_namespace, validate_topic};

/// The default payload limit: 1 MiB of encoded JSON.
pub const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;

/// Sends delayed messages and manages them. Cheap to clone; clones share one multiplexed,
/// reconnecting connection.
///
/// # A lost connection
///
/// When Redis restarts (or the connection is closed or reset), the connection in use is dead
/// and the next call meets it ("broken pipe"). The calls a second run cannot change are then
/// run once more, transparently, on the new connection, so the first call after a restart
/// works:
///
/// - every send of the delay queue: [`send`](Self::send), [`send_at`](Self::send_at),
///   [`send_with`](Self::send_with) (without [`replicas`](crate::SendOptions::replicas)) and
///   [`send_batch`](Self::send_batch). Each message's id is fixed before the call, whether
///   you chose it ([`SendOptions::id`](crate::SendOptions::id)) or it was generated here, and
///   a send of an id that is pending or in flight is a duplicate: if the lost connection had
///   carried the first run to Redis, the second changes nothing. A generated id is this
///   call's alone, so its duplicate is reported as `Created`; with your own id the answer
///   may be `Duplicate` (or, with [`replace`](crate::SendOptions::replace) or
///   [`debounce`](crate::SendOptions::debounce), `Replaced`) for the message the first run
///   created: no outcome of a send is lost, but a retried send cannot tell its own first run
///   from another sender's. One case is not covered: a
///   first run that reached Redis, whose message was then handled and acknowledged before
///   the second run (a few milliseconds later) would be sent again; with your own id,
///   [`dedup_for`](crate::SendOptions::dedup_for) closes that too.
/// - the reads: [`find`](Self::find), [`topic_stats`](Self::topic_stats),
///   [`counts`](Self::counts), [`is_paused`](Self::is_paused).
///
/// Only a connection closed or reset before the reply is retried, once: not a timeout (a
/// stopped or slow Redis may still run the first call later) and not a refused connection
/// (Redis is down: the call fails at once). Every other call (cancel, reschedule, the
/// dead-letter calls, pause and resume, the streams' calls, schedules, a send with
/// `replicas`) fails with [`Error::Redis`](crate::Error::Redis) as before, and the next
/// call works: retry it yourself where a second run is what you want.
#[derive(Clone)]
pub struct Producer {
    pub(crate) conn: RedisConn,
    namespace: Arc<str>,
    max_payload: usize,
    /// Registry entries this producer already added (see catalog.rs).
    registered: Catalog,
    /// Set once the namespace's layout version was checked (see layout.rs).
    pub(crate) layout_checked: Arc<tokio::sync::OnceCell<()>>,
    /// Sends that wait for replicas write and wait here (see replicated.rs).
    pub(crate) replicated: Arc<Replicated>,
    /// The waits of this producer and its clones (`delay/results/hub.rs`'s hub), made with
    /// the first; untyped, so that this shared part names no system.
    pub(crate) waits: Arc<std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("namespace", &self.namespace)
            .field("max_payload", &self.max_payload)
            .finish_non_exhaustive()
    }
}

impl Producer {
    /// A producer over an open connection (the runtime shares its own this way).
    pub(crate) fn over(conn: RedisConn, namespace: &str) -> Self {
        Producer {
            namespace: namespace.into(),
            max_payload: DEFAULT_MAX_PAYLOAD,
            registered: Catalog::default(),
            layout_checked: Arc::default(),
            replicated: Arc::new(Replicated::new(conn.clone())),
            waits: Arc::default(),
            conn,
        }
    }

    /// The same producer under another namespace.
    ///
    /// # Errors
    /// [`Error::InvalidNamespace`](crate::Error::InvalidNamespace).
    pub fn with_namespace(mut self, namespace: &str) -> Result<Self> {
        validate_namespace(namespace)?;
        self.namespace = namespace.into();
        // What was registered is per namespace.
        self.registered = Catalog::default();
        self.layout_checked = Arc::default();
        Ok(self)
    }

    /// The same producer with another payload limit in bytes (of encoded JSON).
    pub fn with_max_payload(mut self, bytes: usize) -> Self {
        self.max_payload = bytes;
        self
    }

    /// The payload limit in bytes (of encoded JSON).
    /// Field `field` of hash `key` (`None`: no such field or key).
    pub(crate) async fn hget(&self, key: &str, field: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .run(|mut c| async move {
                redis::cmd("HGET")
                    .arg(key)
                    .arg(field)
                    .query_async(&mut c)
                    .await
            })
            .await?)
    }

    pub(crate) fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// The namespace keys are created under.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub(crate) fn encode<T: Serialize + ?Sized>(&self, payload: &T) -> Result<Vec<u8>> {
        let bytes = serde_json::to_vec(payload)?;
        if bytes.len() > self.max_payload {
            return Err(Error::PayloadTooLarge {
                size: bytes.len(),
                limit: self.max_payload,
            });
        }
        Ok(bytes)
    }

    /// Adds `name` to the registry set of `kind`, once per producer.
    pub(crate) async fn register(&self, kind: Registered, name: &str) -> Result<()> {
        self.registered
            .register(&self.conn, self.namespace(), kind, name)
            .await
    }

    /// The registered names of `kind`, sorted.
    pub(crate) async fn registered(&self, kind: Registered) -> Result<Vec<String>> {
        Catalog::list(&self.conn, self.namespace(), kind).await
    }

    /// Every topic that has been sent to or listened on under this namespace, sorted.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn topics(&self) -> Result<Vec<String>> {
        self.registered(Registered::Topic).await
    }

    /// Every stream that has been published to or consumed under this namespace, sorted.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn streams(&self) -> Result<Vec<String>> {
        self.registered(Registered::Stream).await
    }

    /// Every waiting room that has been entered or ticked under this namespace, sorted.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn rooms(&self) -> Result<Vec<String>> {
        self.registered(Registered::Room).await
    }

    /// Adds `topic` to the registry (the runtime does this for the topics it listens on).
    #[doc(hidden)]
    pub async fn register_topic(&self, topic: &str) -> Result<()> {
        validate_topic(topic)?;
        self.register(Registered::Topic, topic).await
    }

    /// Adds `stream` to the registry (the runtime does this for the streams it consumes).
    #[doc(hidden)]
    pub async fn register_stream(&self, stream: &str) -> Result<()> {
        validate_name("stream", stream)?;
        self.register(Registered::Stream, stream).await
    }
}
