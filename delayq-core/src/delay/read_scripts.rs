//! The builders of the scripts the operator's reads and dead-letter actions run (`list.lua`,
//! `replay_dead.lua`, `purge_dead.lua`); the consumer's and producer's are in `scripts.rs`.

use redis::ScriptInvocation;

use super::buckets::{Buckets, NONE};
use super::keys::TopicKeys;
use super::scripts::{topic_script, SCRIPTS};
use crate::id::MessageId;

/// A state of a message, as `list.lua` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Delayed,
    Dead,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Delayed => "delayed",
            State::Dead => "dead",
        }
    }
}

pub(crate) fn list(
    k: &TopicKeys,
    state: State,
    start: usize,
    stop: usize,
) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.list, k, &NONE);
    inv.arg(state.name()).arg("range").arg(start).arg(stop);
    inv
}

/// One bounded HSCAN step through far bucket `bucket` (see `list.lua`, mode 'far').
pub(crate) fn list_far(
    k: &TopicKeys,
    bucket: &str,
    cursor: &str,
    count: usize,
) -> ScriptInvocation<'static> {
    let far = Buckets::default().bucket(bucket.parse().ok());
    let mut inv = topic_script(&SCRIPTS.list, k, &far);
    inv.arg(State::Delayed.name())
        .arg("far")
        .arg(bucket)
        .arg(cursor)
        .arg(count);
    inv
}

pub(crate) fn list_one(
    k: &TopicKeys,
    far: &Buckets,
    state: State,
    id: &MessageId,
) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.list, k, far);
    inv.arg(state.name()).arg("id").arg(id.as_str());
    inv
}

pub(crate) fn replay_one(k: &TopicKeys, id: &MessageId) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.replay_dead, k, &NONE);
    inv.arg("one").arg(id.as_str());
    inv
}

/// `cutoff_ms`: `None` on the first call of a replay (the script takes its now).
pub(crate) fn replay_oldest(
    k: &TopicKeys,
    count: usize,
    skip: usize,
    cutoff_ms: Option<u64>,
) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.replay_dead, k, &NONE);
    inv.arg("oldest")
        .arg(count)
        .arg(skip)
        .arg(cutoff_ms.map(|c| c.to_string()).unwrap_or_default());
    inv
}

pub(crate) fn purge_dead(k: &TopicKeys, count: usize) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.purge_dead, k, &NONE);
    inv.arg("oldest").arg(count);
    inv
}

pub(crate) fn purge_dead_one(k: &TopicKeys, id: &MessageId) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.purge_dead, k, &NONE);
    inv.arg("id").arg(id.as_str());
    inv
}
