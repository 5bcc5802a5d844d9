//! Variable names: `DELAYQ_LISTENER_<TOPIC>_<OPTION>` and its siblings. A name is upper-cased
//! with `.`, `-` and `:` as `_`; the runtime matches variables against the names it knows.

use super::options::Kind;

/// The variable naming the configuration file.
pub const CONFIG_VAR: &str = "DELAYQ_CONFIG";

/// The prefix of `kind`'s variables (`DELAYQ_LISTENER_`, …); runtime options have none of
/// their own (`DELAYQ_NAMESPACE`).
pub fn variable_prefix(kind: Kind) -> &'static str {
    match kind {
        Kind::Runtime => "DELAYQ_",
        Kind::Listener => "DELAYQ_LISTENER_",
        Kind::Stream => "DELAYQ_STREAM_",
        Kind::LeaderTask => "DELAYQ_LEADER_TASK_",
        Kind::Schedule => "DELAYQ_SCHEDULE_",
    }
}

/// A name as it appears in a variable: upper case, `.` `-` `:` as `_`.
pub fn env_name(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '.' | '-' | ':' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect()
}
