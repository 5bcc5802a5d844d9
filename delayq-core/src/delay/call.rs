//! Running a topic's calls: a failure is turned into an [`Error`] that names what to do, and a
//! WRONGTYPE into the key that holds a foreign value.

use redis::RedisError;

use super::keys::TopicKeys;
use crate::connection::{AnyConn, RedisConn};
use crate::error::{Error, Result};

/// Turns a failed call on `keys` into an [`Error`]; a WRONGTYPE is traced to the key that
/// holds the foreign value, so the message can name it.
pub(crate) async fn explain(conn: &RedisConn, keys: &TopicKeys, err: RedisError) -> Error {
    // Inside a script, a command's WRONGTYPE comes back as a script error whose code is the
    // script's, with WRONGTYPE only in its text; so the text is checked too.
    if !matches!(err.code(), Some("WRONGTYPE")) && !err.to_string().contains("WRONGTYPE") {
        return Error::Redis(err);
    }
    // A key a script checks before it writes (a far bucket, whose name is not among the
    // topic's fixed keys) is named in its answer: `WRONGTYPE delayq: <key> holds a <type>
    // where delayq keeps a <type>` (far.lua's `key_type`), named before the fixed keys are
    // looked at: one of those the call never touched may be foreign too.
    let text = err.to_string();
    let named = text
        .split_once("delayq: ")
        .and_then(|(_, rest)| rest.split_once(" holds a "))
        .and_then(|(key, rest)| Some((key, rest.split_once(" where delayq keeps a ")?)));
    if let Some((key, (found, expected))) = named {
        let expected = ["hash", "zset", "string"]
            .into_iter()
            .find(|t| expected.starts_with(t));
        if let Some(expected) = expected {
            return Error::WrongType {
                key: key.to_string(),
                expected,
                found: found.to_string(),
            };
        }
    }
    first_foreign(conn, &keys.typed())
        .await
        .unwrap_or(Error::Redis(err))
}

/// [`Error::WrongType`] for the first of `keys` (key, the type delayq keeps there) that holds
/// a value of another type, if one does.
pub(crate) async fn first_foreign(
    conn: &RedisConn,
    keys: &[(&str, &'static str)],
) -> Option<Error> {
    let (_, mut c) = conn.current();
    for &(key, expected) in keys {
        let found: Option<String> = redis::cmd("TYPE").arg(key).query_async(&mut c).await.ok();
        if let Some(found) = found.filter(|t| t != expected && t != "none") {
            return Some(Error::WrongType {
                key: key.to_string(),
                expected,
                found,
            });
        }
    }
    None
}

/// Runs `call` (commands on the topic whose keys are `keys`) on `conn`; a failure is
/// explained as above.
pub(crate) async fn on_topic<T, F, Fut>(conn: &RedisConn, keys: &TopicKeys, call: F) -> Result<T>
where
    F: FnOnce(AnyConn) -> Fut,
    Fut: std::future::Future<Output = redis::RedisResult<T>>,
{
    match conn.run(call).await {
        Ok(v) => Ok(v),
        Err(e) => Err(explain(conn, keys, e).await),
    }
}

/// Runs a script on the topic whose keys are `keys`; a failure is explained as above.
pub(crate) async fn invoke<T: redis::FromRedisValue>(
    conn: &RedisConn,
    keys: &TopicKeys,
    script: &redis::ScriptInvocation<'_>,
) -> Result<T> {
    on_topic(conn, keys, |mut c| async move {
        script.invoke_async(&mut c).await
    })
    .await
}
