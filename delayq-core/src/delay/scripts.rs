//! The delay queue's Lua scripts (`scripts/delay/`), one per state change, each loaded once with
//! the prelude in front, and one typed builder per script.

use redis::{Script, ScriptInvocation};

use super::buckets::{Buckets, NONE};
use super::flow::Flow;
use super::keys::TopicKeys;
use super::receipt::{with_receipts, AnswerOrder, Receipt};
use crate::id::MessageId;
use crate::script::scripts;

use super::due::when_kind;
pub(crate) use super::due::Due;
pub(crate) use super::read_scripts::{
    list, list_far, list_one, purge_dead, purge_dead_one, replay_oldest, replay_one, State,
};

pub(super) const PRELUDE: &str = include_str!("../scripts/delay/prelude.lua");
/// The far buckets' part of the delay queue's prelude.
pub(super) const FAR: &str = include_str!("../scripts/delay/far.lua");
/// Storing, removing and promoting far messages.
pub(super) const FAR_PLACE: &str = include_str!("../scripts/delay/far_place.lua");

scripts!(
    Scripts,
    SCRIPTS,
    "delay/",
    format!("{PRELUDE}\n{FAR}\n{FAR_PLACE}"),
    [
        send,
        claim_due,
        ack,
        bury,
        extend,
        nack,
        release,
        cancel,
        reschedule,
        list,
        replay_dead,
        purge_dead,
        tick,
        state,
        find,
        pause,
        ack_keep,
        outcome,
    ]
);

// The back pool's sweep also samples the topic's backlog into its history (so that a topic
// nothing happens on still has one, at no command of its own): the history's merge in front.
scripts!(
    SweepScripts,
    SWEEP_SCRIPTS,
    "delay/",
    format!("{PRELUDE}\n{FAR}\n{FAR_PLACE}\n{}", crate::history::MERGE),
    [requeue_expired]
);

/// `script` invoked on a topic: every script takes the topic's keys in one order, KEYS[1] delayed,
/// KEYS[2] inflight, KEYS[3] msg, KEYS[4] dead, KEYS[5] seq, KEYS[6] stats, KEYS[7] far,
/// KEYS[8] where, KEYS[9] farinfo, KEYS[10] paused, KEYS[11] done, KEYS[12] ready, KEYS[13] keyrate, KEYS[14] priority, KEYS[15] waits, KEYS[16]
/// results, KEYS[17] results by expiry, KEYS[18] steps, then the far bucket keys the call may touch (`far`), the
/// wake channel as ARGV[1] and the command that publishes on it as ARGV[2] (see `prelude.lua`
/// and `far.lua`); its own arguments follow.
pub(super) fn topic_script(
    script: &'static Script,
    k: &TopicKeys,
    far: &Buckets,
) -> ScriptInvocation<'static> {
    let mut inv = script.key(&k.delayed);
    inv.key(&k.inflight)
        .key(&k.msg)
        .key(&k.dead)
        .key(&k.seq)
        .key(&k.stats)
        .key(&k.far)
        .key(&k.far_index)
        .key(&k.farinfo)
        .key(&k.paused)
        .key(&k.done)
        .key(&k.ready)
        .key(&k.keyrate)
        .key(&k.priority)
        .key(&k.waits)
        .key(&k.results)
        .key(&k.results_by)
        .key(&k.steps);
    for b in &far.0 {
        inv.key(format!("{}:{b}", k.far));
    }
    inv.arg(&k.wake).arg(k.publish);
    inv
}

/// Appends `(id, token)` pairs.
fn with_deliveries(
    mut inv: ScriptInvocation<'static>,
    deliveries: &[(MessageId, u64)],
) -> ScriptInvocation<'static> {
    for (id, token) in deliveries {
        inv.arg(id.as_str()).arg(*token);
    }
    inv
}

// One typed builder per script, each with the arguments its header lists, in that order.

/// What every message of one `send.lua` call shares.
pub(crate) struct Outgoing<'a> {
    /// Replace a pending message with this id instead of keeping it.
    pub replace: bool,
    /// Whether the messages' `when` is unix ms (`Due::AtMs`) rather than ms from the server's
    /// now (`Due::InMs`).
    pub at: bool,
    /// 0 for the listener's default.
    pub max_attempts: u32,
    /// How long the id stays reserved once the message finished (`dedup_for`), ms; 0 for not.
    pub dedup_ms: u64,
    /// 0-255, higher claimed first among due messages.
    pub priority: u8,
    /// The message key `rate_per_key` counts by, or empty.
    pub key: &'a str,
    /// The sender's W3C traceparent, or empty.
    pub trace: &'a str,
}

/// A `send.lua` call of `messages` (id, `when` as `shared.at` says, payload).
pub(crate) fn send<'a>(
    k: &TopicKeys,
    far: &Buckets,
    shared: &Outgoing<'_>,
    messages: impl IntoIterator<Item = (&'a MessageId, u64, &'a [u8])>,
) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.send, k, far);
    inv.arg(if shared.replace { "replace" } else { "new" })
        .arg(when_kind(shared.at))
        .arg(shared.max_attempts)
        .arg(shared.dedup_ms)
        .arg(shared.priority)
        .arg(shared.key)
        .arg(shared.trace);
    for (id, when, payload) in messages {
        inv.arg(id.as_str()).arg(when).arg(payload);
    }
    inv
}

pub(crate) fn claim_due(
    k: &TopicKeys,
    far: &Buckets,
    (max, lease_ms): (usize, u64),
    flow: &Flow,
    acks: &[Receipt],
) -> (ScriptInvocation<'static>, AnswerOrder) {
    let mut inv = topic_script(&SCRIPTS.claim_due, k, far);
    inv.arg(max)
        .arg(lease_ms)
        .arg(super::flow::rate_arg(flow.rate))
        .arg(super::flow::rate_arg(flow.rate_per_key))
        .arg(flow.dead_max)
        .arg(flow.dead_ttl_ms);
    with_receipts(inv, acks)
}

pub(crate) fn ack(
    k: &TopicKeys,
    deliveries: &[Receipt],
) -> (ScriptInvocation<'static>, AnswerOrder) {
    with_receipts(topic_script(&SCRIPTS.ack, k, &NONE), deliveries)
}

pub(crate) fn bury(
    k: &TopicKeys,
    id: &MessageId,
    token: u64,
    flow: &Flow,
) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.bury, k, &NONE);
    inv.arg(id.as_str()).arg(token);
    inv.arg(flow.dead_max).arg(flow.dead_ttl_ms);
    inv
}

pub(crate) fn extend(
    k: &TopicKeys,
    lease_ms: u64,
    deliveries: &[(MessageId, u64)],
) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.extend, k, &NONE);
    inv.arg(lease_ms);
    with_deliveries(inv, deliveries)
}

/// The arguments of `nack.lua` after the id and token.
pub(crate) struct Failure<'a> {
    pub backoff_ms: u64,
    pub error: &'a str,
    pub default_max_attempts: u32,
    /// Dead-letter now with this reason, instead of retrying while attempts remain.
    pub dead_reason: Option<&'a str>,
    /// The attempt does not count: back after the backoff whatever attempts remain.
    pub later: bool,
    /// The run was stopped at its listener's `timeout` (counted as a timeout too).
    pub timed_out: bool,
    /// The topic's dead-letter bounds.
    pub flow: &'a Flow,
}

pub(crate) fn nack(
    k: &TopicKeys,
    far: &Buckets,
    id: &MessageId,
    token: u64,
    failure: &Failure<'_>,
) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.nack, k, far);
    inv.arg(id.as_str())
        .arg(token)
        .arg(failure.backoff_ms)
        .arg(failure.error)
        .arg(failure.default_max_attempts)
        .arg(failure.dead_reason.unwrap_or(""))
        .arg(match (failure.later, failure.timed_out) {
            (true, _) => "1",
            (false, true) => "t",
            (false, false) => "0",
        })
        .arg(failure.flow.dead_max)
        .arg(failure.flow.dead_ttl_ms);
    inv
}

pub(crate) fn release(k: &TopicKeys, deliveries: &[(MessageId, u64)]) -> ScriptInvocation<'static> {
    with_deliveries(topic_script(&SCRIPTS.release, k, &NONE), deliveries)
}

pub(crate) fn requeue_expired(
    k: &TopicKeys,
    max: usize,
    default_max_attempts: u32,
    flow: &Flow,
) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SWEEP_SCRIPTS.requeue_expired, k, &NONE);
    // After the topic's eighteen keys (and no far bucket): its history, KEYS[19] and [20].
    inv.key(&k.history).key(&k.history_hours);
    inv.arg(max)
        .arg(default_max_attempts)
        .arg(flow.dead_max)
        .arg(flow.dead_ttl_ms)
        .arg(flow.results_max)
        .arg(flow.result_ttl_ms);
    inv
}

/// Pauses the topic (`true`) or resumes it, waking its bosses.
pub(crate) fn pause(k: &TopicKeys, paused: bool) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.pause, k, &Buckets::default());
    inv.arg(u8::from(paused));
    inv
}

pub(crate) fn cancel(k: &TopicKeys, far: &Buckets, id: &MessageId) -> ScriptInvocation<'static> {
    let mut inv = topic_script(&SCRIPTS.cancel, k, far);
    inv.arg(id.as_str());
    inv
}

pub(crate) fn reschedule(
    k: &TopicKeys,
    far: &Buckets,
    id: &MessageId,
    due: Due,
) -> ScriptInvocation<'static> {
    let (kind, when) = due.kind_and_ms();
    let mut inv = topic_script(&SCRIPTS.reschedule, k, far);
    inv.arg(id.as_str()).arg(kind).arg(when);
    inv
}

/// The payload of a wake-up that tells the boss the head of `delayed` moved earlier
/// (`WAKE_BOSS` in `prelude.lua`).
pub const WAKE_BOSS: &[u8] = b"d";
/// The payload of a wake-up that tells the back pool a claim landed in an empty `inflight`
/// (`WAKE_BACK` in `prelude.lua`), followed by the claim's ack deadline in ms.
pub const WAKE_BACK: &[u8] = b"i";
/// The payload of a wake-up that tells every boss a claim took what was due, followed by
/// `<when to look next, ms, -1: nothing waits>:<the claim's time, µs>` (`WAKE_CLAIMED` in
/// `prelude.lua`).
pub const WAKE_CLAIMED: &[u8] = b"c";
/// The payload of a wake-up from the test kit's time travel (`WAKE_TRAVEL` in `prelude.lua`):
/// every boss looks now, one waiting on the rate limit included.
pub const WAKE_TRAVEL: &[u8] = b"t";
