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

/// One delivery's place in its books: the settled flag the books see, and the calls that
/// settle it or take it off. The topic lease and the stream lease each hold one.
pub(crate) struct BookEntry<K: Eq + Hash> {
    books: Arc<Books<K>>,
    key: K,
    settled: Arc<AtomicBool>,
}

impl<K: Eq + Hash> BookEntry<K> {
    /// Enters a delivery just claimed under `key`.
    pub(crate) fn enter(books: Arc<Books<K>>, key: K) -> Self
    where
        K: Clone,
    {
        let settled = Arc::new(AtomicBool::new(false));
        books.enter(key.clone(), settled.clone());
        BookEntry {
            books,
            key,
            settled,
        }
    }

    pub(crate) fn is_settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }

    /// Takes it off the books: it is settled, or another delivery owns the message now (a
    /// stale answer), so there is nothing this process could hand back.
    pub(crate) fn leave(&self) {
        self.books.remove(&self.key);
    }

    /// Marks it settled and takes it off the books, so shutdown does not hand it back.
    pub(crate) fn settle(&self) {
        self.settled.store(true, Ordering::Release);
        self.leave();
    }

    /// `Err(Stale)` for a stale answer, which also takes the delivery off the books.
    pub(crate) fn stale(&self) -> Result<(), delayq_core::AckError> {
        self.leave();
        Err(delayq_core::AckError::Stale)
    }
}
