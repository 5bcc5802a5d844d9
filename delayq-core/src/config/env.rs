//! Variable names: `DELAYQ_LISTENER_<TOPIC>_<OPTION>` and its siblings. A name is upper-cased
//! with `.`, `-` and `:` as `_`; the runtime matches variables against the names it knows.

use super::options::{options, Kind};
use super::suggest::nearest;

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

/// delayq's variables that are not options of the runtime.
pub const NOT_OPTIONS: [&str; 3] = [
    "DELAYQ_CONFIG",
    "DELAYQ_REDIS_CA_FILE",
    "DELAYQ_DASHBOARD_TOKEN",
];
/// Prefixes of variables delayq's own test kit and examples read.
const RESERVED_PREFIXES: [&str; 2] = ["DELAYQ_TEST_", "DELAYQ_EXAMPLE_"];

/// Whether `name` has the shape of a variable Kubernetes sets for a Service (`<SVC>_PORT`,
/// `<SVC>_PORT_6379_TCP_ADDR`, `<SVC>_SERVICE_HOST`, `<SVC>_SERVICE_PORT_HTTP`): a Service named
/// `delayq-redis` gives `DELAYQ_REDIS_PORT`, which is near `DELAYQ_REDIS_URL` but no typo.
fn kubernetes_link(name: &str) -> bool {
    let parts: Vec<&str> = name.split('_').collect();
    name.contains("_SERVICE_HOST")
        || name.contains("_SERVICE_PORT")
        || parts.last() == Some(&"PORT")
        || parts.windows(3).any(|w| {
            w[0] == "PORT"
                && w[1].chars().all(|c| c.is_ascii_digit())
                && matches!(w[2], "TCP" | "UDP" | "SCTP")
        })
}

/// The problem with variable `name` when it is a near miss of a runtime option
/// (`DELAYQ_NAMESPCE`): every part that reads the environment (the runtime, producers, the
/// CLI) refuses it the same way. Other `DELAYQ_` names near nothing pass (the environment is
/// shared), as do delayq's own that are not options, the test kit's and examples', and the
/// shapes of Kubernetes service links; component variables (`DELAYQ_LISTENER_…`) are checked
/// by the runtime against its components.
pub fn runtime_variable_typo(name: &str) -> Option<String> {
    let runtime = variable_prefix(Kind::Runtime);
    let components = [
        Kind::Listener,
        Kind::Stream,
        Kind::LeaderTask,
        Kind::Schedule,
    ];
    let valid: Vec<String> = options(Kind::Runtime)
        .iter()
        .map(|(o, _)| format!("{runtime}{}", env_name(o)))
        .collect();
    if !name.starts_with(runtime)
        || components
            .iter()
            .any(|k| name.starts_with(variable_prefix(*k)))
        || valid.iter().any(|v| v == name)
        || NOT_OPTIONS.contains(&name)
        || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
        || kubernetes_link(name)
    {
        return None;
    }
    let near = nearest(name, valid.iter().map(String::as_str).chain(NOT_OPTIONS))?;
    Some(format!(
        "{name}: names no runtime option; did you mean {near}?"
    ))
}
