//! The hub's reads of what its waits wait for (see `hub.rs`): after a channel is subscribed
//! anew, and every `RECHECK_EVERY` while waits stand. A topic's messages are read by
//! `outcome.lua` in chunks; a watched field by one HGET.

use std::sync::atomic::Ordering;

use super::hub::{Hub, Watched};
use super::outcome::{outcomes, Outcome, RawOutcome, Register};
use crate::id::MessageId;

/// Ids one read takes.
const RECHECK_CHUNK: usize = 500;

impl Hub {
    /// Reads how what the waits under `channels` (all when `None`) wait for stands, and
    /// answers those that ended.
    pub(super) fn recheck(&self, channels: Option<Vec<String>>) {
        // The periodic read of all is skipped while one is under way (a slow Redis); a read of
        // channels just subscribed always runs.
        if channels.is_none() && self.0.rechecking.swap(true, Ordering::AcqRel) {
            return;
        }
        let all = channels.is_none();
        let hub = self.clone();
        tokio::spawn(async move {
            let work: Vec<(String, Watched, Vec<MessageId>)> = {
                let state = hub.lock();
                state
                    .channels
                    .iter()
                    .filter(|(name, _)| channels.as_ref().is_none_or(|only| only.contains(name)))
                    .map(|(name, c)| {
                        (
                            name.clone(),
                            c.watched.clone(),
                            c.waiters.keys().cloned().collect(),
                        )
                    })
                    .collect()
            };
            for (name, watched, ids) in work {
                match watched {
                    Watched::Topic(keys) => {
                        for chunk in ids.chunks(RECHECK_CHUNK) {
                            let Ok(got) = outcomes(&hub.0.conn, &keys, Register::No, chunk).await
                            else {
                                continue; // read again at the next round
                            };
                            for (id, outcome) in chunk.iter().zip(got) {
                                if !matches!(outcome, Outcome::Pending) {
                                    hub.answer(&name, id.as_str(), &outcome);
                                }
                            }
                        }
                    }
                    Watched::Field {
                        key,
                        field,
                        pending,
                    } => {
                        let Some(outcome) = hub.read_field(&key, &field, &pending).await else {
                            continue;
                        };
                        for id in &ids {
                            hub.answer(&name, id.as_str(), &outcome);
                        }
                    }
                }
            }
            if all {
                hub.0.rechecking.store(false, Ordering::Release);
            }
        });
    }

    /// A watched field as a wait's answer: `Done` with its value once it is not `pending`,
    /// `Unknown` once it is gone, `None` while it is `pending` (or Redis did not answer).
    pub(crate) async fn read_field(
        &self,
        key: &str,
        field: &str,
        pending: &str,
    ) -> Option<RawOutcome> {
        let value = self
            .0
            .conn
            .run(|mut c| async move {
                redis::cmd("HGET")
                    .arg(key)
                    .arg(field)
                    .query_async::<Option<Vec<u8>>>(&mut c)
                    .await
            })
            .await
            .ok()?;
        match value {
            None => Some(Outcome::Unknown),
            Some(v) if v == pending.as_bytes() => None,
            Some(v) => Some(Outcome::Done(v)),
        }
    }
}
