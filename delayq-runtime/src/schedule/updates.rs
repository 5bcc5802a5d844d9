//! How the tick writer takes what its reader read: a usable record becomes a known schedule,
//! a broken one is skipped (in health and the log) and read again with backoff, and one that
//! is gone or not this runtime's is forgotten.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use delayq_core::protocol::RecordRead;

use super::backoff::{Backoff, Broken};
use super::reader::Update;
use super::writer::TickWriter;

/// A record that cannot be used is read again after this, doubling up to `BROKEN_LAST` (at
/// most a command a second for a record that stays broken).
const BROKEN_FIRST: Duration = Duration::from_secs(1);
const BROKEN_LAST: Duration = Duration::from_secs(60);

impl TickWriter {
    pub(super) fn apply(&mut self, update: Update) {
        let reads = match update {
            Update::All(reads) => {
                let now: HashSet<&str> = reads.iter().map(|(n, ..)| n.as_str()).collect();
                let old: Vec<String> = self
                    .known
                    .keys()
                    .chain(self.broken.keys())
                    .filter(|n| !now.contains(n.as_str()))
                    .cloned()
                    .collect();
                for name in old {
                    self.set(name, String::new(), RecordRead::Gone);
                }
                reads
            }
            Update::Changed(reads) => reads,
        };
        for (name, topic, read) in reads {
            self.set(name, topic, read);
        }
        self.has_schedules
            .store(!self.known.is_empty(), Ordering::Relaxed);
    }

    /// Takes what was read of schedule `name` (on `topic`).
    pub(super) fn set(&mut self, name: String, topic: String, read: RecordRead) {
        self.paused.remove(&name);
        match read {
            RecordRead::Ok(state) if self.producing.takes(&name, state.from_code) => {
                self.broken.remove(&name);
                if self.failing.clear(&name) {
                    tracing::info!(schedule = %name, "the schedule's record can be used again; producing it");
                }
                super::metrics::known(&name);
                self.known.insert(name, *state);
            }
            RecordRead::Broken { from_code, error } if self.producing.takes(&name, from_code) => {
                self.known.remove(&name);
                if self.failing.set(&name, &error) {
                    tracing::error!(schedule = %name, topic = %topic, %error, "a schedule's record cannot be used; skipping it (the other schedules go on) and reading it again with backoff");
                }
                match self.broken.get_mut(&name) {
                    Some(b) => {
                        b.topic = topic;
                        b.backoff.again();
                    }
                    None => {
                        self.broken.insert(
                            name,
                            Broken {
                                topic,
                                backoff: Backoff::new(BROKEN_FIRST, BROKEN_LAST),
                            },
                        );
                    }
                }
            }
            _ => {
                self.known.remove(&name);
                self.broken.remove(&name);
                self.failing.clear(&name);
            }
        }
    }
}
