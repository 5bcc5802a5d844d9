//! The environment as a source: `DELAYQ_<OPTION>` for the runtime's options and the variables
//! under each component prefix, matched against the linked names.

use std::collections::HashMap;
use std::ffi::OsString;

use delayq_core::config::{
    env_name, nearest, options, runtime_variable_typo, variable_prefix, ConfigSource, Kind, Raw,
    Scope,
};

use super::linked::Linked;
use super::Layer;

/// The environment's layer: `DELAYQ_<OPTION>` for the runtime's options, and every variable
/// under a component prefix, which must name a linked component and one of its options.
pub(super) fn env_layer(
    linked: &Linked,
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    problems: &mut Vec<String>,
) -> Layer {
    let mut valid: HashMap<String, Vec<(Scope, &'static str)>> = HashMap::new();
    for scope in linked.scopes() {
        let kind = scope.kind();
        let base = match &scope {
            Scope::Runtime => variable_prefix(kind).to_string(),
            Scope::Stream(s, g) => {
                format!("{}{}_{}_", variable_prefix(kind), env_name(s), env_name(g))
            }
            other => format!("{}{}_", variable_prefix(kind), env_name(&other.name())),
        };
        for (option, _) in options(kind) {
            valid
                .entry(format!("{base}{}", env_name(option)))
                .or_default()
                .push((scope.clone(), option));
        }
    }
    let prefixes = [
        Kind::Listener,
        Kind::Stream,
        Kind::LeaderTask,
        Kind::Schedule,
    ];
    let mut layer = Layer::default();
    // Only DELAYQ_ variables, read as bytes: another program's variable that is not UTF-8
    // must not stop this one (std::env::vars() would panic on it).
    let mut vars: Vec<(String, String)> = vars
        .into_iter()
        .filter_map(|(name, value)| {
            let name = name.into_string().ok()?;
            if !name.starts_with(variable_prefix(Kind::Runtime)) {
                return None;
            }
            let value = value.into_string().unwrap_or_else(|v| {
                // Refused below as a bad value, shown escaped.
                v.to_string_lossy().into_owned()
            });
            Some((name, value))
        })
        .collect();
    vars.sort();
    for (name, value) in vars {
        let kind = prefixes
            .into_iter()
            .find(|k| name.starts_with(variable_prefix(*k)));
        let targets = match (valid.get(&name), kind) {
            (Some(targets), _) => targets,
            (None, Some(kind)) => {
                let names = valid
                    .keys()
                    .filter(|n| n.starts_with(variable_prefix(kind)))
                    .map(String::as_str);
                let hint = match nearest(&name, names) {
                    Some(n) => format!("; did you mean {n}?"),
                    None => String::new(),
                };
                problems.push(format!(
                    "{name}: names no {} option of this binary{hint}",
                    kind.noun()
                ));
                continue;
            }
            // Other DELAYQ_ variables: delayq's own that are not options, and names others
            // give (Kubernetes sets DELAYQ_SERVICE_HOST for a Service named delayq) pass; a
            // near miss of a runtime option (DELAYQ_NAMESPCE) is a typo, refused.
            (None, None) => {
                problems.extend(runtime_variable_typo(&name));
                continue;
            }
        };
        if targets.len() > 1 {
            let names: Vec<String> = targets.iter().map(|(s, o)| s.key(o)).collect();
            problems.push(format!(
                "{name}: matches more than one option ({}); set them in the file instead",
                names.join(", ")
            ));
            continue;
        }
        let (scope, option) = targets[0].clone();
        let kind = options(scope.kind())
            .iter()
            .find(|(o, _)| *o == option)
            .map(|(_, k)| *k)
            .expect("listed above");
        // An empty DELAYQ_REDIS_URL or DELAYQ_NAMESPACE has always meant "not set".
        if scope == Scope::Runtime && value.trim().is_empty() {
            continue;
        }
        match delayq_core::config::parse(kind, &Raw::Text(value)) {
            Ok(parsed) => {
                let source = ConfigSource::Environment {
                    variable: name.clone(),
                };
                layer.values.insert((scope, option), (parsed, source));
            }
            Err(e) => problems.push(format!("{name}: {}: {e}", scope.key(option))),
        }
    }
    layer
}
