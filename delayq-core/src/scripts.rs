//! The Lua scripts, one per state change, each loaded once with the shared prelude in front.

use std::collections::{BTreeSet, HashMap};
use std::sync::{LazyLock, Mutex};

use redis::{FromRedisValue, Script, ScriptInvocation};

use crate::conn::{invoke, RedisConn};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::keys::TopicKeys;

const PRELUDE: &str = include_str!("scripts/prelude.lua");
/// The far buckets' part of the delay queue's prelude.
const FAR: &str = include_str!("scripts/far.lua");

/// Declares a set of scripts: a struct with one `Script` per name, each the file
/// `scripts/<dir><name>.lua` with `prelude` in front, compiled (hashed) once per process.
macro_rules! scripts {
    ($set:ident, $static:ident, $dir:literal, $prelude:expr, [$($name:ident),* $(,)?]) => {
        pub(crate) struct $set {
            $(pub(crate) $name: redis::Script,)*
        }

        pub(crate) static $static: std::sync::LazyLock<$set> = std::sync::LazyLock::new(|| $set {
            $($name: redis::Script::new(&format!(
                "{}\n{}",
                $prelude,
                include_str!(concat!("scripts/", $dir, stringify!($name), ".lua"))
            )),)*
        });
    };
}
pub(crate) use scripts;

scripts!(
    Scripts,
    SCRIPTS,
    "",
    format!("{PRELUDE}\n{FAR}"),
    [
        send,
        claim_due,
        ack,
        extend,
        nack,
        release,
        requeue_expired,
        cancel,
        reschedule,
        list,
        replay_dead,
        purge_dead,
    ]
);

/// `script` on a topic: every script takes the topic's keys in one order, KEYS[1] delayed,
/// KEYS[2] inflight, KEYS[3] msg, KEYS[4] dead, KEYS[5] seq, KEYS[6] stats, KEYS[7] far,
/// KEYS[8] where, KEYS[9] farinfo, then the far bucket keys the call may touch (`far`), the
/// wake channel as ARGV[1] and the command that publishes on it as ARGV[2] (see `prelude.lua`
/// and `far.lua`); its own arguments follow.
fn on_topic(script: &'static Script, k: &TopicKeys, far: &Buckets) -> ScriptInvocation<'static> {
    let mut inv = script.key(&k.delayed);
    inv.key(&k.inflight)
        .key(&k.msg)
        .key(&k.dead)
        .key(&k.seq)
        .key(&k.stats)
        .key(&k.far)
        .key(&k.far_index)
        .key(&k.farinfo);
    for b in &far.0 {
        inv.key(format!("{}:{b}", k.far));
    }
    inv.arg(&k.wake).arg(k.publish);
    inv
}

/// The width of a topic's far buckets (ms) when nothing else is known (`DEFAULT_BUCKET_MS`
/// in far.lua).
const DEFAULT_BUCKET_MS: u64 = 60_000;
/// How far this machine's clock may be from the Redis server's before a call guesses a far
/// bucket wrong (it then costs one more round trip, see [`declaring`]).
const CLOCK_SLACK_MS: u64 = 2_000;
/// Calls of one script at most while it asks for buckets: the buckets a call needs can change
/// between two calls only by what other clients do in between.
const NEED_ROUNDS: usize = 4;

/// Bucket widths other than the default, by `farinfo` key, as the scripts reported them.
static WIDTHS: LazyLock<Mutex<HashMap<String, u64>>> = LazyLock::new(Default::default);

fn width_of(k: &TopicKeys) -> u64 {
    let widths = WIDTHS.lock().unwrap_or_else(|p| p.into_inner());
    widths.get(&k.farinfo).copied().unwrap_or(DEFAULT_BUCKET_MS)
}

fn learn_width(k: &TopicKeys, width: u64) {
    let mut widths = WIDTHS.lock().unwrap_or_else(|p| p.into_inner());
    if width == DEFAULT_BUCKET_MS {
        widths.remove(&k.farinfo);
    } else {
        widths.insert(k.farinfo.clone(), width);
    }
}

/// The far buckets a call declares, by number (see "Declared buckets" in far.lua): what the
/// caller expects the script to touch. A wrong guess costs a round trip, never correctness:
/// the script asks for what it lacks before it writes anything.
#[derive(Debug, Clone, Default)]
pub(crate) struct Buckets(BTreeSet<i64>);

/// No far bucket: for the scripts that touch only the hot keys.
static NONE: Buckets = Buckets(BTreeSet::new());

impl Buckets {
    /// The bucket of a due time this machine expects (unix ms), and its neighbour when the
    /// time is within [`CLOCK_SLACK_MS`] of their boundary.
    pub(crate) fn due(mut self, k: &TopicKeys, unix_ms: u64) -> Self {
        let width = width_of(k).max(1);
        for t in [
            unix_ms.saturating_sub(CLOCK_SLACK_MS),
            unix_ms,
            unix_ms + CLOCK_SLACK_MS,
        ] {
            self.0.insert((t / width) as i64);
        }
        self
    }

    /// The bucket of a generated id's time, where the scripts look for it first.
    pub(crate) fn id(mut self, k: &TopicKeys, id: &MessageId) -> Self {
        if let Ok(ulid) = ulid::Ulid::from_string(id.as_str()) {
            self.0
                .insert((ulid.timestamp_ms() / width_of(k).max(1)) as i64);
        }
        self
    }

    /// Bucket `b`, when known.
    pub(crate) fn bucket(mut self, b: Option<i64>) -> Self {
        self.0.extend(b);
        self
    }
}

/// The buckets a `DELAYQ_NEED <width> <b>...` error asks for (after learning the width), or
/// `None` for any other error.
fn needed(k: &TopicKeys, err: &Error) -> Option<Vec<i64>> {
    let Error::Redis(e) = err else { return None };
    if e.code() != Some("DELAYQ_NEED") {
        return None;
    }
    let mut words = e.detail()?.split_whitespace().map(str::parse::<i64>);
    let width = words.next()?.ok()?;
    learn_width(k, u64::try_from(width).ok()?);
    words.collect::<std::result::Result<_, _>>().ok()
}

/// Runs the script `build` makes for the far buckets `far` on `keys`' topic, calling again
/// with more while the script answers that it needs buckets it was not given (it does so
/// before it writes anything, so a call again is safe).
pub(crate) async fn declaring<T: FromRedisValue>(
    conn: &RedisConn,
    keys: &TopicKeys,
    mut far: Buckets,
    build: impl Fn(&Buckets) -> ScriptInvocation<'static>,
) -> Result<T> {
    let mut last = None;
    for _ in 0..NEED_ROUNDS {
        match invoke(conn, keys, &build(&far)).await {
            Err(err) => match needed(keys, &err) {
                Some(more) => {
                    far.0.extend(more);
                    last = Some(err);
                }
                None => return Err(err),
            },
            ok => return ok,
        }
    }
    Err(last.unwrap_or_else(|| Error::unexpected("a script", &"no reply")))
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

/// When a message becomes due, as the scripts take it (`when_kind`, `when`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Due {
    /// Milliseconds from the Redis server's now.
    InMs(u64),
    /// Unix milliseconds.
    AtMs(u64),
}

impl Due {
    /// The due time in unix ms by this machine's clock (for a delay, an estimate of the
    /// server's).
    pub(crate) fn expected_unix_ms(self) -> u64 {
        match self {
            Due::InMs(ms) => {
                crate::envelope::time_to_ms(std::time::SystemTime::now()).saturating_add(ms)
            }
            Due::AtMs(ms) => ms,
        }
    }

    fn kind_and_ms(self) -> (&'static str, u64) {
        match self {
            Due::InMs(ms) => ("delay", ms),
            Due::AtMs(ms) => ("at", ms),
        }
    }
}

/// One message for `send.lua`.
pub(crate) struct Outgoing<'a> {
    pub id: &'a MessageId,
    /// Replace a pending message with this id instead of keeping it.
    pub replace: bool,
    pub due: Due,
    /// 0 for the listener's default.
    pub max_attempts: u32,
    /// The sender's W3C traceparent, or empty.
    pub trace: &'a str,
    pub payload: &'a [u8],
}

pub(crate) fn send<'a>(
    k: &TopicKeys,
    far: &Buckets,
    messages: impl IntoIterator<Item = Outgoing<'a>>,
) -> ScriptInvocation<'static> {
    let mut inv = on_topic(&SCRIPTS.send, k, far);
    for m in messages {
        let (kind, when) = m.due.kind_and_ms();
        inv.arg(m.id.as_str())
            .arg(if m.replace { "replace" } else { "new" })
            .arg(kind)
            .arg(when)
            .arg(m.max_attempts)
            .arg(m.trace)
            .arg(m.payload);
    }
    inv
}

pub(crate) fn claim_due(
    k: &TopicKeys,
    far: &Buckets,
    max: usize,
    lease_ms: u64,
) -> ScriptInvocation<'static> {
    let mut inv = on_topic(&SCRIPTS.claim_due, k, far);
    inv.arg(max).arg(lease_ms);
    inv
}

pub(crate) fn ack(k: &TopicKeys, deliveries: &[(MessageId, u64)]) -> ScriptInvocation<'static> {
    with_deliveries(on_topic(&SCRIPTS.ack, k, &NONE), deliveries)
}

pub(crate) fn extend(
    k: &TopicKeys,
    lease_ms: u64,
    deliveries: &[(MessageId, u64)],
) -> ScriptInvocation<'static> {
    let mut inv = on_topic(&SCRIPTS.extend, k, &NONE);
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
}

pub(crate) fn nack(
    k: &TopicKeys,
    far: &Buckets,
    id: &MessageId,
    token: u64,
    failure: Failure<'_>,
) -> ScriptInvocation<'static> {
    let mut inv = on_topic(&SCRIPTS.nack, k, far);
    inv.arg(id.as_str())
        .arg(token)
        .arg(failure.backoff_ms)
        .arg(failure.error)
        .arg(failure.default_max_attempts)
        .arg(failure.dead_reason.unwrap_or(""));
    inv
}

pub(crate) fn release(k: &TopicKeys, deliveries: &[(MessageId, u64)]) -> ScriptInvocation<'static> {
    with_deliveries(on_topic(&SCRIPTS.release, k, &NONE), deliveries)
}

pub(crate) fn requeue_expired(
    k: &TopicKeys,
    max: usize,
    default_max_attempts: u32,
) -> ScriptInvocation<'static> {
    let mut inv = on_topic(&SCRIPTS.requeue_expired, k, &NONE);
    inv.arg(max).arg(default_max_attempts);
    inv
}

pub(crate) fn cancel(k: &TopicKeys, far: &Buckets, id: &MessageId) -> ScriptInvocation<'static> {
    let mut inv = on_topic(&SCRIPTS.cancel, k, far);
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
    let mut inv = on_topic(&SCRIPTS.reschedule, k, far);
    inv.arg(id.as_str()).arg(kind).arg(when);
    inv
}

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
    let mut inv = on_topic(&SCRIPTS.list, k, &NONE);
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
    let mut inv = on_topic(&SCRIPTS.list, k, &far);
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
    let mut inv = on_topic(&SCRIPTS.list, k, far);
    inv.arg(state.name()).arg("id").arg(id.as_str());
    inv
}

pub(crate) fn replay_one(k: &TopicKeys, id: &MessageId) -> ScriptInvocation<'static> {
    let mut inv = on_topic(&SCRIPTS.replay_dead, k, &NONE);
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
    let mut inv = on_topic(&SCRIPTS.replay_dead, k, &NONE);
    inv.arg("oldest")
        .arg(count)
        .arg(skip)
        .arg(cutoff_ms.map(|c| c.to_string()).unwrap_or_default());
    inv
}

pub(crate) fn purge_dead(k: &TopicKeys, count: usize) -> ScriptInvocation<'static> {
    let mut inv = on_topic(&SCRIPTS.purge_dead, k, &NONE);
    inv.arg("oldest").arg(count);
    inv
}

pub(crate) fn purge_dead_one(k: &TopicKeys, id: &MessageId) -> ScriptInvocation<'static> {
    let mut inv = on_topic(&SCRIPTS.purge_dead, k, &NONE);
    inv.arg("id").arg(id.as_str());
    inv
}

/// The payload of a wake-up that tells the boss the head of `delayed` moved earlier
/// (`WAKE_BOSS` in `prelude.lua`).
pub const WAKE_BOSS: &[u8] = b"d";
/// The payload of a wake-up that tells the back pool a claim landed in an empty `inflight`
/// (`WAKE_BACK` in `prelude.lua`).
pub const WAKE_BACK: &[u8] = b"i";
