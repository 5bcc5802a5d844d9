//! The far buckets a call declares (see "Declared buckets" in `scripts/delay/far.lua`): every
//! key a script touches must be declared on a cluster, so a call names the buckets it expects
//! and the script asks for what it lacks (`DELAYQ_NEED`) before it writes anything.

use std::collections::{BTreeSet, HashMap};
use std::sync::{LazyLock, Mutex};

use redis::{FromRedisValue, ScriptInvocation};

use super::call::invoke;
use super::keys::TopicKeys;
use crate::connection::RedisConn;
use crate::error::{Error, Result};
use crate::id::MessageId;

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
pub(crate) struct Buckets(pub(super) BTreeSet<i64>);

/// No far bucket: for the scripts that touch only the hot keys.
pub(super) static NONE: Buckets = Buckets(BTreeSet::new());

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

    /// Buckets `bs`.
    pub(crate) fn buckets(mut self, bs: impl IntoIterator<Item = i64>) -> Self {
        self.0.extend(bs);
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
