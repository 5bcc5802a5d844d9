//! External configuration resolved against this binary's registrations: for every option of
//! the runtime and of each listener, stream listener, leader task and schedule, the value of
//! the highest source that sets it (builder > environment > file > attribute > default), and
//! where it came from. Unknown names and bad values refuse start, each problem named.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use delayq_core::config::{
    env_name, nearest, options, variable_prefix, BackoffSpec, ConfigFile, ConfigSource,
    ConfigValue, Kind, Parsed, Raw, Scope,
};
use delayq_core::{Error, Result};
use serde::Serialize;

use crate::delay::{all_listeners, ListenerRegistration};
use crate::leader::{all_leader_tasks, LeaderTaskRegistration};
use crate::options::{Backoff, ListenerOptions};
use crate::schedule::{all_schedules, ScheduleRegistration};
use crate::stream::{all_stream_listeners, StreamListenerRegistration};

/// One option's effective value and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Setting {
    /// The option's name, as in the file (`concurrency`).
    pub option: &'static str,
    /// The value, as the file would write it (`64`, `30s`, `exp(1s, 10m)`).
    pub value: String,
    /// Where it came from.
    pub source: ConfigSource,
    #[serde(skip)]
    parsed: Parsed,
}

/// The effective options of one listener, stream listener, leader task or schedule.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentConfig {
    /// What it is.
    pub kind: Kind,
    /// Its topic, `stream/group`, or name.
    pub name: String,
    /// The function it runs (`module::path::function`).
    pub function: &'static str,
    /// Whether it runs (`enabled = false` switches it off).
    pub enabled: bool,
    /// Every option it takes, `enabled` included.
    pub settings: Vec<Setting>,
}

/// The options a runtime runs with, each with its source: what
/// [`RuntimeHandle::config`](crate::RuntimeHandle::config) returns.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EffectiveConfig {
    /// The configuration file read, if any.
    pub file: Option<PathBuf>,
    /// The runtime's own options (`redis_url`, `namespace`, `shutdown_grace`, …); those no
    /// source set and without a default (`prometheus`, `health`) are left out.
    pub runtime: Vec<Setting>,
    /// Every listener, stream listener, leader task and schedule the runtime selected,
    /// disabled ones included.
    pub components: Vec<ComponentConfig>,
}

impl EffectiveConfig {
    /// The runtime option `option`, if set.
    pub fn runtime(&self, option: &str) -> Option<&Setting> {
        self.runtime.iter().find(|s| s.option == option)
    }

    /// The delay listener of `topic`.
    pub fn listener(&self, topic: &str) -> Option<&ComponentConfig> {
        self.find(Kind::Listener, topic)
    }

    /// The stream listener of `stream` and `group`.
    pub fn stream(&self, stream: &str, group: &str) -> Option<&ComponentConfig> {
        self.find(Kind::Stream, &format!("{stream}/{group}"))
    }

    /// The leader task `name`.
    pub fn leader_task(&self, name: &str) -> Option<&ComponentConfig> {
        self.find(Kind::LeaderTask, name)
    }

    /// The `#[scheduled]` fn of schedule `name`.
    pub fn schedule(&self, name: &str) -> Option<&ComponentConfig> {
        self.find(Kind::Schedule, name)
    }

    fn find(&self, kind: Kind, name: &str) -> Option<&ComponentConfig> {
        self.components
            .iter()
            .find(|c| c.kind == kind && c.name == name)
    }

    pub(crate) fn parsed(&self, option: &str) -> Option<&Parsed> {
        self.runtime(option).map(|s| &s.parsed)
    }
}

impl ComponentConfig {
    /// The option `option`.
    pub fn get(&self, option: &str) -> Option<&Setting> {
        self.settings.iter().find(|s| s.option == option)
    }

    /// `option=value (source), …`: the one log line's worth.
    pub(crate) fn summary(&self) -> String {
        let parts: Vec<String> = self
            .settings
            .iter()
            .filter(|s| s.option != "enabled")
            .map(|s| format!("{}={} ({})", s.option, s.value, s.source))
            .collect();
        parts.join(", ")
    }

    fn count(&self, option: &str) -> u32 {
        match self.get(option).map(|s| &s.parsed) {
            Some(Parsed::Count(n)) => *n,
            other => unreachable!("{option} is a count: {other:?}"),
        }
    }

    fn ms(&self, option: &str) -> u64 {
        match self.get(option).map(|s| &s.parsed) {
            Some(Parsed::Ms(ms)) => *ms,
            other => unreachable!("{option} is a duration: {other:?}"),
        }
    }

    fn text(&self, option: &str) -> Option<&str> {
        match self.get(option).map(|s| &s.parsed) {
            Some(Parsed::Text(t)) => Some(t),
            _ => None,
        }
    }

    /// The listener options (for a stream: `max_deliveries` and `min_idle`).
    pub(crate) fn listener_options(&self) -> ListenerOptions {
        let (attempts, lease) = match self.kind {
            Kind::Stream => ("max_deliveries", "min_idle"),
            _ => ("max_attempts", "ack_timeout"),
        };
        let backoff = match self.get("backoff").map(|s| &s.parsed) {
            Some(Parsed::Backoff(BackoffSpec::Exponential { base_ms, max_ms })) => {
                Backoff::Exponential {
                    base_ms: *base_ms,
                    max_ms: *max_ms,
                }
            }
            Some(Parsed::Backoff(BackoffSpec::Fixed { ms })) => Backoff::Fixed { ms: *ms },
            other => unreachable!("backoff: {other:?}"),
        };
        ListenerOptions {
            concurrency: self.count("concurrency"),
            max_attempts: self.count(attempts),
            ack_timeout_ms: self.ms(lease),
            backoff,
        }
    }

    /// A stream listener's `batch`.
    pub(crate) fn batch(&self) -> u32 {
        self.count("batch")
    }

    /// Whether a new group of this stream listener reads from the stream's start.
    pub(crate) fn reads_from_start(&self) -> bool {
        matches!(
            self.get("start").map(|s| &s.parsed),
            Some(Parsed::FromStart(true))
        )
    }

    /// A leader task's (`every`, `ttl`), in ms.
    pub(crate) fn every_and_ttl(&self) -> (u64, u64) {
        (self.ms("every"), self.ms("ttl"))
    }

    /// A schedule's spec.
    pub(crate) fn schedule(&self) -> Result<delayq_core::Schedule> {
        let schedule = match self.text("cron") {
            Some(pattern) => delayq_core::Schedule::cron(pattern)?,
            None => {
                delayq_core::Schedule::every(std::time::Duration::from_millis(self.ms("every")))?
            }
        };
        let catch_up = match self.get("catch_up").map(|s| &s.parsed) {
            Some(Parsed::CatchUp(c)) => *c,
            other => unreachable!("catch_up: {other:?}"),
        };
        Ok(schedule
            .tz(self.text("tz").unwrap_or("UTC"))?
            .catch_up(catch_up))
    }
}

/// The values a source sets, by component and option.
#[derive(Default)]
struct Layer {
    values: HashMap<(Scope, &'static str), (Parsed, ConfigSource)>,
}

/// Every source, read: the builder's `set` calls, the environment, the file.
pub(super) struct Sources {
    builder: Layer,
    env: Layer,
    file: Layer,
    file_path: Option<PathBuf>,
}

/// Every linked registration, by kind: the names a source may configure.
struct Linked {
    listeners: Vec<&'static ListenerRegistration>,
    streams: Vec<&'static StreamListenerRegistration>,
    leader_tasks: Vec<&'static LeaderTaskRegistration>,
    schedules: Vec<&'static ScheduleRegistration>,
}

impl Linked {
    fn all() -> Result<Self> {
        Ok(Linked {
            listeners: all_listeners()?,
            streams: all_stream_listeners()?,
            leader_tasks: all_leader_tasks()?,
            schedules: all_schedules()?,
        })
    }

    fn scopes(&self) -> Vec<Scope> {
        let mut scopes = vec![Scope::Runtime];
        scopes.extend(
            self.listeners
                .iter()
                .map(|r| Scope::Listener(r.topic.into())),
        );
        scopes.extend(
            self.streams
                .iter()
                .map(|r| Scope::Stream(r.stream.into(), r.group.into())),
        );
        scopes.extend(
            self.leader_tasks
                .iter()
                .map(|r| Scope::LeaderTask(r.name.into())),
        );
        scopes.extend(
            self.schedules
                .iter()
                .map(|r| Scope::Schedule(r.name.into())),
        );
        scopes
    }

    /// The problem with a scope no linked registration has, with the nearest one.
    fn unknown(&self, scope: &Scope) -> Option<String> {
        let known = self.scopes();
        if known.contains(scope) {
            return None;
        }
        let kind = scope.kind();
        let names: Vec<String> = known
            .iter()
            .filter(|s| s.kind() == kind)
            .map(Scope::name)
            .collect();
        let hint = match nearest(&scope.name(), names.iter().map(String::as_str)) {
            Some(n) => format!("; did you mean {n:?}?"),
            None if names.is_empty() => format!("; it has no {} at all", plural(kind)),
            None => format!("; it has: {}", names.join(", ")),
        };
        Some(format!(
            "no {} {:?} in this binary{hint}",
            kind.noun(),
            scope.name()
        ))
    }
}

fn plural(kind: Kind) -> &'static str {
    match kind {
        Kind::Runtime => "runtime options",
        Kind::Listener => "#[delay_listener] fns",
        Kind::Stream => "#[stream_listener] fns",
        Kind::LeaderTask => "#[leader_task] fns",
        Kind::Schedule => "#[scheduled] fns",
    }
}

/// The label of the builder as a source in messages.
const BUILDER: &str = "Runtime::builder().set";

impl Sources {
    /// Reads the file (`explicit`, `DELAYQ_CONFIG` or `./delayq.toml`) and the environment
    /// (`vars`), and checks the builder's `set` calls; every name against the linked
    /// registrations. One error lists every problem.
    pub(super) fn read(
        explicit_file: Option<&Path>,
        vars: impl IntoIterator<Item = (String, String)>,
        sets: &[(String, ConfigValue)],
        external: bool,
    ) -> Result<Sources> {
        let linked = Linked::all()?;
        let mut problems = Vec::new();
        let mut sources = Sources {
            builder: Layer::default(),
            env: Layer::default(),
            file: Layer::default(),
            file_path: None,
        };
        for (key, value) in sets {
            match ConfigFile::setting(BUILDER, key, Raw::Typed(value.clone())) {
                Ok((scope, option, parsed)) => match linked.unknown(&scope) {
                    Some(p) => problems.push(format!("{BUILDER}({key:?}): {p}")),
                    None => {
                        sources
                            .builder
                            .values
                            .insert((scope, option), (parsed, ConfigSource::Builder));
                    }
                },
                Err(p) => problems.push(p),
            }
        }
        if external {
            if let Some(path) = ConfigFile::locate(explicit_file) {
                let (file, file_problems) = ConfigFile::read_checked(&path)?;
                problems.extend(file_problems);
                for s in file.settings {
                    if let Some(p) = linked.unknown(&s.scope) {
                        let key = s.scope.key(s.option);
                        let key = key.trim_end_matches(s.option).trim_end_matches('.');
                        problems.push(format!("{}:{}: {key}: {p}", file.path.display(), s.line));
                        continue;
                    }
                    let source = ConfigSource::File {
                        path: file.path.clone(),
                        line: s.line,
                    };
                    sources
                        .file
                        .values
                        .insert((s.scope, s.option), (s.value, source));
                }
                sources.file_path = Some(file.path);
            }
            sources.env = env_layer(&linked, vars, &mut problems);
        }
        if problems.is_empty() {
            Ok(sources)
        } else {
            Err(Error::Config(format!(
                "{} problem{}; nothing was started:\n{}",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" },
                problems.join("\n")
            )))
        }
    }

    /// The effective value of `option` of `scope`: the highest source's, else `fallback`
    /// (the attribute's or the default, with which of the two).
    fn pick(
        &self,
        scope: &Scope,
        option: &'static str,
        fallback: Option<(Parsed, ConfigSource)>,
    ) -> Option<Setting> {
        let key = (scope.clone(), option);
        let (parsed, source) = [&self.builder, &self.env, &self.file]
            .into_iter()
            .find_map(|layer| layer.values.get(&key).cloned())
            .or(fallback)?;
        Some(Setting {
            option,
            value: parsed.to_string(),
            source,
            parsed,
        })
    }

    /// The runtime's own options: `builder` holds what the builder's own methods set.
    pub(super) fn runtime(&self, builder: &[(&'static str, Parsed)]) -> EffectiveConfig {
        let defaults: [(&str, Option<Parsed>); 6] = [
            (
                "redis_url",
                Some(Parsed::Text(delayq_core::DEFAULT_REDIS_URL.into())),
            ),
            (
                "namespace",
                Some(Parsed::Text(delayq_core::DEFAULT_NAMESPACE.into())),
            ),
            (
                "shutdown_grace",
                Some(Parsed::Ms(
                    super::builder::DEFAULT_SHUTDOWN_GRACE.as_millis() as u64,
                )),
            ),
            ("gauges_every", None),
            ("prometheus", None),
            ("health", None),
        ];
        let mut runtime = Vec::new();
        for (option, _) in options(Kind::Runtime) {
            let from_builder = builder
                .iter()
                .find(|(o, _)| o == option)
                .map(|(_, p)| Setting {
                    option,
                    value: p.to_string(),
                    source: ConfigSource::Builder,
                    parsed: p.clone(),
                });
            let default = defaults
                .iter()
                .find(|(o, _)| o == option)
                .and_then(|(_, d)| d.clone())
                .map(|d| (d, ConfigSource::Default));
            if let Some(s) = from_builder.or_else(|| self.pick(&Scope::Runtime, option, default)) {
                runtime.push(s);
            }
        }
        EffectiveConfig {
            file: self.file_path.clone(),
            runtime,
            components: Vec::new(),
        }
    }

    fn component(
        &self,
        scope: Scope,
        function: &'static str,
        given: &[&str],
        attribute: impl Fn(&str) -> Option<Parsed>,
    ) -> ComponentConfig {
        let kind = scope.kind();
        let mut settings = Vec::new();
        for (option, _) in options(kind) {
            let fallback = attribute(option).map(|p| {
                let source = if given.contains(option) {
                    ConfigSource::Attribute
                } else {
                    ConfigSource::Default
                };
                (p, source)
            });
            if let Some(s) = self.pick(&scope, option, fallback) {
                settings.push(s);
            }
        }
        let enabled = !matches!(
            settings
                .iter()
                .find(|s| s.option == "enabled")
                .map(|s| &s.parsed),
            Some(Parsed::Bool(false))
        );
        ComponentConfig {
            kind,
            name: scope.name(),
            function,
            enabled,
            settings,
        }
    }

    pub(super) fn listener(&self, r: &ListenerRegistration) -> ComponentConfig {
        let o = r.options;
        self.component(
            Scope::Listener(r.topic.into()),
            r.function,
            r.given,
            |option| listener_value(&o, option),
        )
    }

    pub(super) fn stream(&self, r: &StreamListenerRegistration) -> ComponentConfig {
        let o = r.options;
        self.component(
            Scope::Stream(r.stream.into(), r.group.into()),
            r.function,
            r.given,
            |option| match option {
                "max_deliveries" => Some(Parsed::Count(o.max_attempts)),
                "min_idle" => Some(Parsed::Ms(o.ack_timeout_ms)),
                "batch" => Some(Parsed::Count(r.batch)),
                "start" => Some(Parsed::FromStart(r.from_start)),
                other => listener_value(&o, other),
            },
        )
    }

    pub(super) fn leader_task(&self, r: &LeaderTaskRegistration) -> ComponentConfig {
        self.component(
            Scope::LeaderTask(r.name.into()),
            r.function,
            r.given,
            |option| match option {
                "enabled" => Some(Parsed::Bool(true)),
                "every" => Some(Parsed::Ms(r.every_ms)),
                "ttl" => Some(Parsed::Ms(r.ttl_ms)),
                _ => None,
            },
        )
    }

    /// A schedule: `cron` and `every` exclude each other, so the one from the higher source
    /// wins and the other is left out; both from one source above the attribute is an error.
    pub(super) fn schedule(&self, r: &ScheduleRegistration) -> Result<ComponentConfig> {
        let o = r.listener.options;
        let scope = Scope::Schedule(r.name.into());
        let mut c =
            self.component(
                scope.clone(),
                r.listener.function,
                r.given,
                |option| match option {
                    "cron" => r.cron.map(|c| Parsed::Text(c.into())),
                    "every" => r.cron.is_none().then_some(Parsed::Ms(r.every_ms)),
                    "tz" => Some(Parsed::Text(r.tz.into())),
                    "catch_up" => r.catch_up.parse().ok().map(Parsed::CatchUp),
                    other => listener_value(&o, other),
                },
            );
        let rank = |option: &str| c.get(option).map(|s| source_rank(&s.source));
        match (rank("cron"), rank("every")) {
            (Some(a), Some(b)) if a == b => {
                let cron = c.get("cron").map(|s| s.source.to_string());
                return Err(Error::Config(format!(
                    "{}: both cron and every are set ({}); set one of them",
                    scope.key("cron").trim_end_matches(".cron"),
                    cron.unwrap_or_default()
                )));
            }
            (Some(a), Some(b)) => {
                let drop = if a > b { "every" } else { "cron" };
                c.settings.retain(|s| s.option != drop);
            }
            _ => {}
        }
        Ok(c)
    }
}

fn source_rank(source: &ConfigSource) -> u8 {
    match source {
        ConfigSource::Builder => 4,
        ConfigSource::Environment { .. } => 3,
        ConfigSource::File { .. } => 2,
        ConfigSource::Attribute => 1,
        ConfigSource::Default => 0,
    }
}

fn listener_value(o: &ListenerOptions, option: &str) -> Option<Parsed> {
    Some(match option {
        "enabled" => Parsed::Bool(true),
        "concurrency" => Parsed::Count(o.concurrency),
        "max_attempts" => Parsed::Count(o.max_attempts),
        "ack_timeout" => Parsed::Ms(o.ack_timeout_ms),
        "backoff" => Parsed::Backoff(match o.backoff {
            Backoff::Exponential { base_ms, max_ms } => {
                BackoffSpec::Exponential { base_ms, max_ms }
            }
            Backoff::Fixed { ms } => BackoffSpec::Fixed { ms },
        }),
        _ => return None,
    })
}

/// The environment's layer: `DELAYQ_<OPTION>` for the runtime's options, and every variable
/// under a component prefix, which must name a linked component and one of its options.
fn env_layer(
    linked: &Linked,
    vars: impl IntoIterator<Item = (String, String)>,
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
    let mut vars: Vec<(String, String)> = vars.into_iter().collect();
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
            // Other DELAYQ_ variables (DELAYQ_CONFIG, DELAYQ_REDIS_CA_FILE, …) are not options.
            (None, None) => continue,
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
