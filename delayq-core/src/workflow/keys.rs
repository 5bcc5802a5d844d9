//! A flow's keys (one hash tag: a slot of its own), its scripts, and its step messages' ids.

use redis::{Script, ScriptInvocation};

use crate::connection::RedisConn;
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::script::scripts;

const PRELUDE: &str = include_str!("../scripts/workflow/prelude.lua");

scripts!(
    Scripts,
    SCRIPTS,
    "workflow/",
    PRELUDE,
    [create, outbox, sent, started, unsent, settle, cancel, retry, add]
);

pub use crate::id::is_step_id;
pub(crate) use crate::id::STEP_SEP as SEP;

/// A flow's id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId(pub(crate) String);

impl FlowId {
    /// A flow id given as text (from a log line, the CLI).
    ///
    /// # Errors
    /// [`Error::InvalidId`] when it is empty, longer than 64 bytes or holds a character
    /// outside `A-Z a-z 0-9 . _ -`.
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        let ok = !id.is_empty()
            && id.len() <= 64
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !ok {
            return Err(Error::InvalidId {
                id,
                reason: "a flow id is 1 to 64 characters from A-Z a-z 0-9 . _ -".into(),
            });
        }
        Ok(FlowId(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for FlowId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The keys of one flow.
pub(crate) struct FlowKeys {
    keys: [String; 6],
    end: String,
    publish: &'static str,
}

impl FlowKeys {
    pub(crate) fn new(conn: &RedisConn, namespace: &str, id: &FlowId) -> Self {
        let key = |s: &str| format!("{namespace}:{{flow:{id}}}:{s}");
        FlowKeys {
            keys: ["meta", "rec", "state", "waiting", "payload", "out"].map(key),
            end: key("end"),
            publish: if conn.is_cluster() {
                "SPUBLISH"
            } else {
                "PUBLISH"
            },
        }
    }

    pub(crate) fn meta(&self) -> &str {
        &self.keys[0]
    }
    pub(crate) fn rec(&self) -> &str {
        &self.keys[1]
    }
    pub(crate) fn state(&self) -> &str {
        &self.keys[2]
    }
    /// The channel its end is announced on.
    pub(crate) fn end(&self) -> &str {
        &self.end
    }

    /// Its keys with the Redis type each holds.
    pub(crate) fn typed(&self) -> Vec<(&str, &'static str)> {
        let types = ["hash", "hash", "hash", "hash", "hash", "set"];
        self.keys.iter().map(String::as_str).zip(types).collect()
    }

    /// `script` on this flow: its six keys, then its end channel and how to publish on it.
    pub(crate) fn invoke(&self, script: &'static Script) -> ScriptInvocation<'static> {
        let mut inv = script.prepare_invoke();
        for k in &self.keys {
            inv.key(k);
        }
        inv.arg(&self.end).arg(self.publish);
        inv
    }
}

/// The index of a namespace's flows (ZSET flow id → created, ms), in a slot of its own.
pub(crate) fn index_key(namespace: &str) -> String {
    format!("{namespace}:{{flows}}:all")
}

/// The message id of step `name`'s run `gen` of flow `flow`.
pub(crate) fn step_message_id(flow: &FlowId, name: &str, gen: u64) -> MessageId {
    MessageId::from_stored(format!("{flow}{SEP}{name}{SEP}{gen}"))
}

/// The flow, step and gen of a step message's id; `None` for another message.
pub(crate) fn parse_step_id(id: &str) -> Option<(FlowId, String, u64)> {
    let mut parts = id.split(SEP);
    let (flow, name, gen) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    Some((
        FlowId(flow.to_string()),
        name.to_string(),
        gen.parse().ok()?,
    ))
}
