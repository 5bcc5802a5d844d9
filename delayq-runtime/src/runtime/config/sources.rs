//! The sources read: the builder's `set` calls, the environment and the file, each a layer of
//! values by component and option; the runtime's own options resolved over them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use delayq_core::config::{
    options, ConfigFile, ConfigSource, ConfigValue, Kind, Parsed, Raw, Scope, SecretUrl,
};
use delayq_core::{Error, Result};

use super::env::env_layer;
use super::linked::Linked;
use super::{EffectiveConfig, Layer, Setting};

/// Every source, read: the builder's `set` calls, the environment, the file.
pub(in crate::runtime) struct Sources {
    builder: Layer,
    env: Layer,
    file: Layer,
    file_path: Option<PathBuf>,
}

/// The label of the builder as a source in messages.
const BUILDER: &str = "Runtime::builder().set";

impl Sources {
    /// Reads the file (`explicit`, `DELAYQ_CONFIG` or `./delayq.toml`) and the environment
    /// (`vars`), and checks the builder's `set` calls; every name against the linked
    /// registrations. One error lists every problem.
    pub(in crate::runtime) fn read(
        explicit_file: Option<&Path>,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
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
    pub(super) fn pick(
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
    pub(in crate::runtime) fn runtime(
        &self,
        builder: &[(&'static str, Parsed)],
    ) -> EffectiveConfig {
        let defaults: [(&str, Option<Parsed>); 7] = [
            (
                "redis_url",
                Some(Parsed::RedisUrl(SecretUrl::new(
                    delayq_core::DEFAULT_REDIS_URL,
                ))),
            ),
            (
                "namespace",
                Some(Parsed::Text(delayq_core::DEFAULT_NAMESPACE.into())),
            ),
            (
                "shutdown_grace",
                Some(Parsed::Ms(
                    super::super::builder::DEFAULT_SHUTDOWN_GRACE.as_millis() as u64,
                )),
            ),
            ("gauges_every", None),
            ("prometheus", None),
            ("health", None),
            (
                "ready_checks",
                Some(Parsed::Text(
                    super::super::probe::DEFAULT_READY_CHECKS.into(),
                )),
            ),
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
}
