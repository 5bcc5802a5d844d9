//! The waits of one producer (and its clones): every wait registers here; one subscriber task
//! (`subscriber.rs`) listens for them all, from the first wait to the last. An end is announced once, when it happens (see "Ends" in `scripts/delay/prelude.lua`), and
//! pub/sub keeps nothing for a subscriber that was away. So whenever a channel is subscribed
//! anew (after a reconnect, a failover or a slot move), and every `RECHECK_EVERY` while waits
//! stand, the task reads how its waited-on messages stand (`outcome.lua`, in chunks) and
//! answers those that ended: a lost announcement, a message deleted by hand or purged, costs
//! a wait at most that long, never its whole timeout.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, watch, Notify};

use super::super::keys::TopicKeys;
use super::outcome::{parse, Outcome, RawOutcome};
use crate::connection::RedisConn;
use crate::id::MessageId;

/// How often the waits still standing are read again.
pub(super) const RECHECK_EVERY: Duration = Duration::from_secs(5);

type Reply = oneshot::Sender<RawOutcome>;

/// One wait on a channel: its token, whether a read may answer it `Unknown` (not until its
/// message was sent, for `send_and_wait`), whether a read found it unknown once, and where
/// the answer goes. A read's `Unknown` answers only at the second read that finds it so: an
/// end that keeps nothing (a handler that returns no value) was announced to a wait that was
/// live, and a read can come between the end and the announcement's arrival.
pub(super) struct Entry {
    token: u64,
    armed: bool,
    unknown_once: bool,
    reply: Reply,
}

/// What a channel's waits wait for.
#[derive(Clone)]
pub(crate) enum Watched {
    /// The ends of a topic's messages (announced `<id>\n<kind>\n<body>`; read by
    /// `outcome.lua`).
    Topic(Arc<TopicKeys>),
    /// A hash field leaving a value (a flow's `state` leaving `running`): any announcement
    /// on the channel answers its waits with what it says (`Done`, the announcement); a read
    /// answers `Done` with the field's value once it is not `pending`, `Unknown` once the
    /// field is gone.
    Field {
        key: String,
        field: String,
        pending: String,
    },
}

/// One channel's waits (a topic's end channel, or a watched field's).
pub(super) struct Channel {
    pub(super) watched: Watched,
    pub(super) waiters: HashMap<MessageId, Vec<Entry>>,
    /// Subscribed on the task's current connection.
    live: bool,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) channels: HashMap<String, Channel>,
    next: u64,
    running: bool,
}

pub(super) struct Inner {
    pub(super) conn: RedisConn,
    pub(super) state: Mutex<State>,
    /// The channels changed: the task subscribes or unsubscribes.
    pub(super) changed: Notify,
    /// Bumped whenever a channel becomes live.
    pub(super) live: watch::Sender<u64>,
    /// A read of the standing waits is under way: the next is not started over it.
    pub(super) rechecking: std::sync::atomic::AtomicBool,
}

/// The waits of a producer and its clones.
#[derive(Clone)]
pub(crate) struct Hub(pub(super) Arc<Inner>);

/// One registered wait; dropping it takes it off the hub.
pub(crate) struct Waiter {
    hub: Hub,
    channel: String,
    id: MessageId,
    token: u64,
    pub(crate) answer: oneshot::Receiver<RawOutcome>,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut state = self.hub.lock();
        let Some(channel) = state.channels.get_mut(&self.channel) else {
            return;
        };
        if let Some(list) = channel.waiters.get_mut(&self.id) {
            list.retain(|e| e.token != self.token);
            if list.is_empty() {
                channel.waiters.remove(&self.id);
            }
        }
        if channel.waiters.is_empty() {
            state.channels.remove(&self.channel);
            self.hub.0.changed.notify_one();
        }
    }
}

impl Waiter {
    /// Lets a read answer this wait `Unknown`: its message has been sent.
    pub(crate) fn arm(&self) {
        let mut state = self.hub.lock();
        let entry = state
            .channels
            .get_mut(&self.channel)
            .and_then(|c| c.waiters.get_mut(&self.id))
            .and_then(|list| list.iter_mut().find(|e| e.token == self.token));
        if let Some(entry) = entry {
            entry.armed = true;
        }
    }
}

impl Hub {
    pub(crate) fn new(conn: RedisConn) -> Self {
        Hub(Arc::new(Inner {
            conn,
            state: Mutex::default(),
            changed: Notify::new(),
            live: watch::channel(0).0,
            rechecking: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a wait for message `id` of `keys`' topic; `armed`: a read may answer it
    /// `Unknown` (see [`Waiter::arm`]). Also whether the subscriber task is to be started
    /// (none runs: the caller spawns `subscriber::run`).
    pub(crate) fn register(
        &self,
        keys: &Arc<TopicKeys>,
        id: &MessageId,
        armed: bool,
    ) -> (Waiter, bool) {
        self.register_on(
            &keys.ended,
            Watched::Topic(keys.clone()),
            id,
            (armed, false),
        )
    }

    /// Registers a wait on `name`, watching `watched`, under `id`; `(armed, unknown_once)` as
    /// [`Entry`]'s (both set: a read's first `Unknown` answers it).
    pub(crate) fn register_on(
        &self,
        name: &str,
        watched: Watched,
        id: &MessageId,
        (armed, unknown_once): (bool, bool),
    ) -> (Waiter, bool) {
        let (tx, rx) = oneshot::channel();
        let mut state = self.lock();
        state.next += 1;
        let token = state.next;
        let channel = state
            .channels
            .entry(name.to_string())
            .or_insert_with(|| Channel {
                watched,
                waiters: HashMap::new(),
                live: false,
            });
        let fresh = channel.waiters.is_empty();
        channel.waiters.entry(id.clone()).or_default().push(Entry {
            token,
            armed,
            unknown_once,
            reply: tx,
        });
        let start = !state.running;
        if start {
            state.running = true;
        } else if fresh {
            self.0.changed.notify_one();
        }
        let waiter = Waiter {
            hub: self.clone(),
            channel: name.to_string(),
            id: id.clone(),
            token,
            answer: rx,
        };
        (waiter, start)
    }

    /// Waits until `channel` is subscribed, or `deadline`; whether it is.
    pub(crate) async fn until_live(&self, channel: &str, deadline: tokio::time::Instant) -> bool {
        let mut live = self.0.live.subscribe();
        loop {
            if self.lock().channels.get(channel).is_some_and(|c| c.live) {
                return true;
            }
            match tokio::time::timeout_at(deadline, live.changed()).await {
                Ok(Ok(())) => {}
                _ => return false,
            }
        }
    }

    /// How many waits stand, and on how many channels (for tests and gauges).
    pub(crate) fn counts(&self) -> (usize, usize) {
        let state = self.lock();
        let waits = state
            .channels
            .values()
            .flat_map(|c| c.waiters.values())
            .map(Vec::len)
            .sum();
        (waits, state.channels.len())
    }

    /// Answers the waits for `id` on `channel` with `outcome` (`Unknown`: see [`Entry`]).
    pub(super) fn answer(&self, channel: &str, id: &str, outcome: &RawOutcome) {
        let mut state = self.lock();
        let Some(c) = state.channels.get_mut(channel) else {
            return;
        };
        let id = MessageId::from_stored(id.to_string());
        let Some(list) = c.waiters.get_mut(&id) else {
            return;
        };
        let unknown = matches!(outcome, Outcome::Unknown);
        for mut entry in std::mem::take(list) {
            if unknown && !(entry.armed && entry.unknown_once) {
                entry.unknown_once |= entry.armed;
                list.push(entry);
            } else {
                let _ = entry.reply.send(outcome.clone());
            }
        }
        if list.is_empty() {
            c.waiters.remove(&id);
        }
    }

    /// An announcement `<id>\n<kind>\n<body>` heard on `channel`.
    pub(super) fn heard(&self, channel: &[u8], payload: &[u8]) {
        // A watched field's announcement answers every wait on its channel.
        if let Ok(name) = std::str::from_utf8(channel) {
            let ids: Option<Vec<MessageId>> = {
                let state = self.lock();
                state.channels.get(name).and_then(|c| match c.watched {
                    Watched::Field { .. } => Some(c.waiters.keys().cloned().collect()),
                    Watched::Topic(_) => None,
                })
            };
            if let Some(ids) = ids {
                for id in ids {
                    self.answer(name, id.as_str(), &Outcome::Done(payload.to_vec()));
                }
                return;
            }
        }
        let (Ok(channel), Some(i)) = (
            std::str::from_utf8(channel),
            payload.iter().position(|&b| b == b'\n'),
        ) else {
            return;
        };
        let (Ok(id), Ok(outcome)) = (std::str::from_utf8(&payload[..i]), parse(&payload[i + 1..]))
        else {
            return;
        };
        self.answer(channel, id, &outcome);
    }

    /// Marks channels live (or all not live), telling the waits.
    pub(super) fn set_live(&self, channels: &[String], live: bool) {
        let mut state = self.lock();
        if live {
            for name in channels {
                if let Some(c) = state.channels.get_mut(name) {
                    c.live = true;
                }
            }
        } else {
            state.channels.values_mut().for_each(|c| c.live = false);
        }
        drop(state);
        if live {
            self.0.live.send_modify(|n| *n += 1);
        }
    }

    /// The channels wanted now, and those of them not live; the task ends (`None`) when
    /// there are none. (A channel left and wanted again before the task looked is still
    /// subscribed, but its waits do not know it.)
    pub(super) fn wanted(&self) -> Option<(HashSet<String>, Vec<String>)> {
        let mut state = self.lock();
        if state.channels.is_empty() {
            state.running = false;
            return None;
        }
        let not_live = state
            .channels
            .iter()
            .filter(|(_, c)| !c.live)
            .map(|(name, _)| name.clone())
            .collect();
        Some((state.channels.keys().cloned().collect(), not_live))
    }

    /// Channels subscribed on the task's connection: their waits are told, and what they may
    /// have missed is read.
    pub(super) fn subscribed_now(&self, channels: Vec<String>) {
        self.set_live(&channels, true);
        self.recheck(Some(channels));
    }
}
