//! What this runtime produces ticks for, and which of those schedules fail (their records
//! cannot be used), for health.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::SystemTime;

/// What this runtime produces ticks for.
pub(crate) struct Producing {
    /// The names of the `#[scheduled]` fns it runs.
    pub(crate) code: HashSet<String>,
    /// The topics it listens on (dynamic schedules of those).
    pub(crate) topics: HashSet<String>,
}

impl Producing {
    /// Whether the schedule `name` on `topic` may be this runtime's (its record decides).
    pub(super) fn wants(&self, name: &str, topic: &str) -> bool {
        self.code.contains(name) || self.topics.contains(topic)
    }

    /// Whether a record of `name` owned by code (`from_code`) or not is this runtime's: a
    /// `#[scheduled]` fn's only where that fn runs.
    pub(super) fn takes(&self, name: &str, from_code: bool) -> bool {
        !from_code || self.code.contains(name)
    }
}

/// Schedules this runtime should produce whose records it cannot use: since when and why
/// (shown by `RuntimeHandle::health`).
#[derive(Default)]
pub(crate) struct FailingSchedules(Mutex<BTreeMap<String, (SystemTime, String)>>);

impl FailingSchedules {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (SystemTime, String)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `name` was not failing with `error` already.
    pub(super) fn set(&self, name: &str, error: &str) -> bool {
        let mut all = self.lock();
        if all.get(name).is_some_and(|(_, e)| e == error) {
            return false;
        }
        all.insert(name.to_string(), (SystemTime::now(), error.to_string()));
        true
    }

    /// Whether `name` was failing.
    pub(super) fn clear(&self, name: &str) -> bool {
        self.lock().remove(name).is_some()
    }

    /// Every failing schedule: (name, since, error), by name.
    pub(crate) fn all(&self) -> Vec<(String, SystemTime, String)> {
        self.lock()
            .iter()
            .map(|(n, (since, e))| (n.clone(), *since, e.clone()))
            .collect()
    }
}
