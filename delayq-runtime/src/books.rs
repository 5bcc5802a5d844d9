//! The books of a topic or stream: the deliveries this process claimed and has not settled,
//! so that a shutdown can hand them back. A topic's deliveries are keyed by (id, token), a
//! stream's by entry id.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The keys of the deliveries claimed and not yet settled: a delivery leaves the books when it
/// is settled, so whatever is in them is unsettled.
pub(crate) struct Books<K> {
    claims: Mutex<HashSet<K>>,
}

impl<K> Default for Books<K> {
    fn default() -> Self {
        Books {
            claims: Mutex::new(HashSet::new()),
        }
    }
}

impl<K: Eq + Hash> Books<K> {
    fn claims(&self) -> MutexGuard<'_, HashSet<K>> {
        // A panic while holding this lock cannot leave the set half-updated.
        self.claims.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn enter(&self, key: K) {
        self.claims().insert(key);
    }

    pub(crate) fn remove(&self, key: &K) {
        self.claims().remove(key);
    }

    pub(crate) fn len(&self) -> usize {
        self.claims().len()
    }

    /// Every unsettled delivery, taken off the books.
    pub(crate) fn take_unsettled(&self) -> Vec<K> {
        self.claims().drain().collect()
    }
}

/// One delivery's place in its books: its settled flag, and the calls that settle it or take
/// it off. The topic claim and the stream claim each hold one.
pub(crate) struct BookEntry<K: Eq + Hash> {
    books: Arc<Books<K>>,
    key: K,
    settled: AtomicBool,
}

impl<K: Eq + Hash> BookEntry<K> {
    /// Enters a delivery just claimed under `key`.
    pub(crate) fn enter(books: Arc<Books<K>>, key: K) -> Self
    where
        K: Clone,
    {
        books.enter(key.clone());
        BookEntry {
            books,
            key,
            settled: AtomicBool::new(false),
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
