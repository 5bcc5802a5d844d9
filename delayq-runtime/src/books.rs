//! The books of a topic: the deliveries this process claimed and has not settled, so that a
//! shutdown can hand them back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use delayq_core::MessageId;

/// Claimed deliveries by (id, token), each with its "settled" flag.
#[derive(Default)]
pub(crate) struct Books {
    claims: Mutex<HashMap<(MessageId, u64), Arc<AtomicBool>>>,
}

impl Books {
    fn claims(&self) -> MutexGuard<'_, HashMap<(MessageId, u64), Arc<AtomicBool>>> {
        // A panic while holding this lock cannot leave the map half-updated.
        self.claims.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn enter(&self, id: MessageId, token: u64, settled: Arc<AtomicBool>) {
        self.claims().insert((id, token), settled);
    }

    pub(crate) fn remove(&self, id: &MessageId, token: u64) {
        self.claims().remove(&(id.clone(), token));
    }

    pub(crate) fn len(&self) -> usize {
        self.claims().len()
    }

    /// Every unsettled delivery, taken off the books.
    pub(crate) fn take_unsettled(&self) -> Vec<(MessageId, u64)> {
        self.claims()
            .drain()
            .filter(|(_, settled)| !settled.load(Ordering::Acquire))
            .map(|(key, _)| key)
            .collect()
    }
}
