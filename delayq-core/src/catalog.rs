//! The registry sets of a namespace: which topics, streams and rooms exist, for the CLI and
//! the dashboard, so they never `SCAN` the keyspace. A producer adds a name the first time it
//! uses it (one `SADD`, then remembered for the life of the producer and its clones).
//! The producer's calls that add and list are in producer.rs.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::connection::RedisConn;
use crate::error::Result;

/// The names this producer (and its clones in the same namespace) already added, by kind;
/// looked up without allocating, since every send asks.
#[derive(Debug, Default, Clone)]
pub(crate) struct Catalog(Arc<Mutex<HashMap<Registered, HashSet<String>>>>);

impl Catalog {
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

    /// Adds `name` to the registry set of `kind`, once per producer.
    pub(crate) async fn register(
        &self,
        conn: &RedisConn,
        namespace: &str,
        kind: Registered,
        name: &str,
    ) -> Result<()> {
        if self.contains(kind, name) {
            return Ok(());
        }
        let key = registry_key(namespace, kind);
        let (key, member) = (&key, name);
        let added = conn
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
        self.insert(kind, name);
        Ok(())
    }

    /// The registered names of `kind`, sorted.
    pub(crate) async fn list(
        conn: &RedisConn,
        namespace: &str,
        kind: Registered,
    ) -> Result<Vec<String>> {
        let key = registry_key(namespace, kind);
        let key = &key;
        let mut names: Vec<String> = conn
            .run(|mut c| async move { redis::cmd("SMEMBERS").arg(key).query_async(&mut c).await })
            .await?;
        names.sort();
        Ok(names)
    }
}

/// What the registry sets of a namespace list (see [`registry_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Registered {
    /// Delay-queue topics, added by the first send and by a runtime that listens.
    Topic,
    /// Streams, added by a runtime with stream listeners and by `publish`.
    Stream,
    /// Waiting rooms, added by `WaitingRoom::enter` and by a runtime that ticks one.
    Room,
}

/// The SET of every name of `kind` used under `namespace`, so that the CLI and dashboard find
/// them without `SCAN`. It has no hash tag: on a cluster it lives on its own slot, so it is
/// written by its own command, never from a topic's script.
pub fn registry_key(namespace: &str, kind: Registered) -> String {
    let what = match kind {
        Registered::Topic => "topics",
        Registered::Stream => "streams",
        Registered::Room => "rooms",
    };
    format!("{namespace}:registry:{what}")
}
