//! The books of a topic or stream: the deliveries this process claimed and has not settled,
//! so that a shutdown can hand them back. A topic's deliveries are keyed by (id, token), a
//! stream's by entry id.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Claimed deliveries by key, each with its "settled" flag.
pub(crate) struct Books<K> {
    claims: Mutex<HashMap<K, Arc<AtomicBool>>>,
}

impl<K> Default for Books<K> {
    fn default() -> Self {
        Books {
            claims: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash> Books<K> {
    fn claims(&self) -> MutexGuard<'_, HashMap<K, Arc<AtomicBool>>> {
        // A panic while holding this lock cannot leave the map half-updated.
        self.claims.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn enter(&self, key: K, settled: Arc<AtomicBool>) {
        self.claims().insert(key, settled);
    }

    pub(crate) fn remove(&self, key: &K) {
        self.claims().remove(key);
    }

    pub(crate) fn len(&self) -> usize {
        self.claims().len()
    }

    /// Every unsettled delivery, taken off the books.
    pub(crate) fn take_unsettled(&self) -> Vec<K> {
        self.claims()
            .drain()
            .filter(|(_, settled)| !settled.load(Ordering::Acquire))
            .map(|(key, _)| key)
            .collect()
    }
}
