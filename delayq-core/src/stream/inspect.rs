//! What the CLI and the dashboard read of a stream: its length, dead letters and groups.

use redis::Value;

use super::keys::dead_stream;
use crate::error::{Error, Result};
use crate::names::validate_name;
use crate::producer::Producer;

/// One consumer group of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStats {
    /// The group name.
    pub group: String,
    /// Consumers Redis knows in the group.
    pub consumers: u64,
    /// Entries delivered and not acknowledged.
    pub pending: u64,
    /// Entries not yet delivered to the group, when Redis can tell.
    pub lag: Option<u64>,
}

/// The state of one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamStats {
    /// The stream key.
    pub stream: String,
    /// Entries in the stream.
    pub length: u64,
    /// Entries in its dead-letter stream (all groups).
    pub dead: u64,
    /// Dead letters dropped in all, oldest first, past its groups' `dead_max` or `dead_ttl`.
    pub dead_dropped: u64,
    /// Its consumer groups.
    pub groups: Vec<GroupStats>,
}

fn bad(what: &'static str, detail: impl std::fmt::Debug) -> Error {
    Error::unexpected(what, &detail)
}

impl Producer {
    /// The length, dead letters and consumer groups of `stream` (`XINFO GROUPS`).
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName); [`Error::Redis`](crate::Error::Redis)
    /// when Redis does not answer or refuses the call.
    pub async fn stream_stats(&self, stream: &str) -> Result<StreamStats> {
        validate_name("stream", stream)?;
        let dead_key = dead_stream(stream);
        // XINFO fails on a missing key, and an empty stream may still have groups: whether
        // it exists comes with the lengths.
        let mut pipe = redis::pipe();
        pipe.cmd("XLEN")
            .arg(stream)
            .cmd("XLEN")
            .arg(&dead_key)
            .cmd("EXISTS")
            .arg(stream)
            .cmd("HGET")
            .arg(super::keys::dead_bounds(stream))
            .arg("dropped");
        let pipe = &pipe;
        let (length, dead, exists, dead_dropped): (u64, u64, bool, Option<u64>) = self
            .conn
            .run(|mut c| async move { pipe.query_async(&mut c).await })
            .await?;
        let groups: Value = if exists {
            self.conn
                .run(|mut c| async move {
                    redis::cmd("XINFO")
                        .arg("GROUPS")
                        .arg(stream)
                        .query_async(&mut c)
                        .await
                })
                .await?
        } else {
            Value::Array(Vec::new())
        };
        Ok(StreamStats {
            stream: stream.to_string(),
            length,
            dead,
            dead_dropped: dead_dropped.unwrap_or(0),
            groups: parse_groups(groups)?,
        })
    }
}

/// `XINFO GROUPS`: one map (RESP3) or flat array of field, value (RESP2) per group.
fn parse_groups(reply: Value) -> Result<Vec<GroupStats>> {
    let Value::Array(groups) = reply else {
        return Err(bad("XINFO GROUPS", reply));
    };
    let mut out = Vec::new();
    for g in groups {
        let pairs: Vec<(String, Value)> = match g {
            Value::Map(m) => m
                .into_iter()
                .filter_map(|(k, v)| redis::from_redis_value::<String>(k).ok().map(|k| (k, v)))
                .collect(),
            Value::Array(a) => a
                .chunks(2)
                .filter_map(|kv| match kv {
                    [k, v] => redis::from_redis_value::<String>(k.clone())
                        .ok()
                        .map(|k| (k, v.clone())),
                    _ => None,
                })
                .collect(),
            other => return Err(bad("XINFO GROUPS", other)),
        };
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let num = |name: &str| get(name).and_then(|v| redis::from_redis_value::<u64>(v).ok());
        let group = get("name")
            .and_then(|v| redis::from_redis_value::<String>(v).ok())
            .ok_or_else(|| bad("XINFO GROUPS", "a group without a name"))?;
        out.push(GroupStats {
            group,
            consumers: num("consumers").unwrap_or(0),
            pending: num("pending").unwrap_or(0),
            lag: num("lag"),
        });
    }
    out.sort_by(|a, b| a.group.cmp(&b.group));
    Ok(out)
}
