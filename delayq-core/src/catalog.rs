//! The registry sets of a namespace: which topics, streams and rooms exist, for the CLI and
//! the dashboard, so they never `SCAN` the keyspace. A producer adds a name the first time it
//! uses it (one `SADD`, then remembered for the life of the producer and its clones).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::keys::{registry_key, Registered};
use crate::producer::Producer;

/// The names this producer (and its clones in the same namespace) already added, by kind;
/// looked up without allocating, since every send asks.
#[derive(Debug, Default, Clone)]
pub(crate) struct Remembered(Arc<Mutex<HashMap<Registered, HashSet<String>>>>);

impl Remembered {
    fn contains(&self, kind: Registered, name: &str) -> bool {
        self.0
            .lock()
            .is_ok_and(|known| known.get(&kind).is_some_and(|names| names.contains(name)))
    }

    fn insert(&self, kind: Registered, name: &str) {
        if let Ok(mut known) = self.0.lock() {
            known.entry(kind).or_default().insert(name.to_string());
        }
    }
}

impl Producer {
    /// Adds `name` to the registry set of `kind`, once per producer.
    pub(crate) async fn register(&self, kind: Registered, name: &str) -> Result<()> {
        if self.registered.contains(kind, name) {
            return Ok(());
        }
        let key = registry_key(self.namespace(), kind);
        let (key, member) = (&key, name);
        let added = self
            .conn
            .run(|mut c| async move {
                redis::cmd("SADD")
                    .arg(key)
                    .arg(member)
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await;
        match added {
            Ok(_) => {}
            // An ACL without SADD: the work goes on, only `delayq topics` will not list it.
            Err(e) if e.code() == Some("NOPERM") => tracing::warn!(
                key = %key,
                name = %member,
                error = %e,
                "cannot add to the registry the delayq CLI and dashboard read (grant +sadd); they will not list it"
            ),
            Err(e) => return Err(e.into()),
        }
        self.registered.insert(kind, name);
        Ok(())
    }

    /// The registered names of `kind`, sorted.
    pub(crate) async fn registered(&self, kind: Registered) -> Result<Vec<String>> {
        let key = registry_key(self.namespace(), kind);
        let key = &key;
        let mut names: Vec<String> = self
            .conn
            .run(|mut c| async move { redis::cmd("SMEMBERS").arg(key).query_async(&mut c).await })
            .await?;
        names.sort();
        Ok(names)
    }

    /// Every topic that has been sent to or listened on under this namespace, sorted.
    pub async fn topics(&self) -> Result<Vec<String>> {
        self.registered(Registered::Topic).await
    }

    /// Every stream that has been published to or consumed under this namespace, sorted.
    pub async fn streams(&self) -> Result<Vec<String>> {
        self.registered(Registered::Stream).await
    }

    /// Every waiting room that has been entered or ticked under this namespace, sorted.
    pub async fn rooms(&self) -> Result<Vec<String>> {
        self.registered(Registered::Room).await
    }

    /// Adds `topic` to the registry (the runtime does this for the topics it listens on).
    #[doc(hidden)]
    pub async fn register_topic(&self, topic: &str) -> Result<()> {
        crate::keys::validate_topic(topic)?;
        self.register(Registered::Topic, topic).await
    }

    /// Adds `stream` to the registry (the runtime does this for the streams it consumes).
    #[doc(hidden)]
    pub async fn register_stream(&self, stream: &str) -> Result<()> {
        crate::keys::validate_name("stream", stream)?;
        self.register(Registered::Stream, stream).await
    }
}
