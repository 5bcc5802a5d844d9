//! What a set of options in the file applies to, and how its keys are written.

use crate::config::options::Kind;

/// What a set of options applies to, by name as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// The runtime (top-level keys).
    Runtime,
    /// The delay listener of a topic.
    Listener(String),
    /// The stream listener of a stream and group.
    Stream(String, String),
    /// A leader task.
    LeaderTask(String),
    /// A `#[scheduled]` fn.
    Schedule(String),
}

impl Scope {
    /// The kind of component.
    pub fn kind(&self) -> Kind {
        match self {
            Scope::Runtime => Kind::Runtime,
            Scope::Listener(_) => Kind::Listener,
            Scope::Stream(..) => Kind::Stream,
            Scope::LeaderTask(_) => Kind::LeaderTask,
            Scope::Schedule(_) => Kind::Schedule,
        }
    }

    /// The name shown for it: the topic, `stream/group`, the task's or schedule's name.
    pub fn name(&self) -> String {
        match self {
            Scope::Runtime => String::new(),
            Scope::Listener(n) | Scope::LeaderTask(n) | Scope::Schedule(n) => n.clone(),
            Scope::Stream(s, g) => format!("{s}/{g}"),
        }
    }

    /// The full key of `option` in the file's syntax: `listeners."order.timeout".concurrency`.
    /// The option is quoted like any name (a typo as written may carry anything).
    pub fn key(&self, option: &str) -> String {
        match self {
            Scope::Runtime => quoted(option),
            _ => format!("{}.{}", self.table_key(), quoted(option)),
        }
    }

    /// The key of the table holding this component's options: `listeners."order.timeout"`
    /// (empty for the runtime, whose options stand at the top of the file).
    pub(super) fn table_key(&self) -> String {
        let table = self.kind().table();
        match self {
            Scope::Runtime => String::new(),
            Scope::Listener(n) | Scope::LeaderTask(n) | Scope::Schedule(n) => {
                format!("{table}.{}", quoted(n))
            }
            Scope::Stream(s, g) => format!("{table}.{}.{}", quoted(s), quoted(g)),
        }
    }
}

/// A TOML key, quoted unless bare.
pub(super) fn quoted(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

/// The table header of one component of `kind`, as a hint: `listeners."<topic>"`.
pub(super) fn shape(kind: Kind) -> &'static str {
    match kind {
        Kind::Runtime => "the top of the file",
        Kind::Listener => "listeners.\"<topic>\"",
        Kind::Stream => "streams.\"<stream>\".\"<group>\"",
        Kind::LeaderTask => "leader_tasks.\"<name>\"",
        Kind::Schedule => "schedules.\"<name>\"",
    }
}
