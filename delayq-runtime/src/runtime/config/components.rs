//! Each selected component's effective options: the sources over its attribute and defaults.

use delayq_core::config::{options, ConfigSource, Parsed, Scope};
use delayq_core::{Error, Result, Schedule};

use super::super::builder::Selection;
use super::sources::Sources;
use super::ComponentConfig;
use crate::delay::ListenerRegistration;
use crate::leader::LeaderTaskRegistration;
use crate::options::ListenerOptions;
use crate::schedule::ScheduleRegistration;
use crate::stream::{StreamListenerRegistration, StreamSettings};

/// What a runtime runs, with the effective options: the selection's enabled components.
pub(in crate::runtime) struct Chosen {
    /// Every selected component, the disabled ones included (for the report and health).
    pub(in crate::runtime) components: Vec<ComponentConfig>,
    pub(in crate::runtime) topics: Vec<(&'static ListenerRegistration, ListenerOptions)>,
    pub(in crate::runtime) schedules:
        Vec<(&'static ScheduleRegistration, Schedule, ListenerOptions)>,
    pub(in crate::runtime) streams: Vec<(&'static StreamListenerRegistration, StreamSettings)>,
    /// With (`every`, `ttl`) in ms.
    pub(in crate::runtime) leader_tasks: Vec<(&'static LeaderTaskRegistration, (u64, u64))>,
}

impl Sources {
    /// The effective options of everything `selection` names; only the enabled run.
    pub(in crate::runtime) fn choose(&self, selection: &Selection) -> Result<Chosen> {
        let mut chosen = Chosen {
            components: Vec::new(),
            topics: Vec::new(),
            schedules: Vec::new(),
            streams: Vec::new(),
            leader_tasks: Vec::new(),
        };
        for r in &selection.topics {
            let c = self.listener(r);
            if c.enabled {
                chosen.topics.push((*r, c.listener_options()?));
            }
            chosen.components.push(c);
        }
        for r in &selection.schedules {
            let c = self.schedule(r)?;
            if c.enabled {
                chosen
                    .schedules
                    .push((*r, c.schedule()?, c.listener_options()?));
            }
            chosen.components.push(c);
        }
        for r in &selection.streams {
            let c = self.stream(r);
            if c.enabled {
                let settings = StreamSettings {
                    options: c.listener_options()?,
                    batch: c.batch(),
                    from_start: c.reads_from_start(),
                };
                chosen.streams.push((*r, settings));
            }
            chosen.components.push(c);
        }
        for r in &selection.leader_tasks {
            let c = self.leader_task(r);
            if c.enabled {
                chosen.leader_tasks.push((*r, c.every_and_ttl()));
            }
            chosen.components.push(c);
        }
        Ok(chosen)
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

    fn listener(&self, r: &ListenerRegistration) -> ComponentConfig {
        let o = r.options;
        let mut c = self.component(
            Scope::Listener(r.topic.into()),
            r.function,
            r.given,
            |option| listener_value(&o, option),
        );
        // A burst from below the rate's source (the attribute's, under a rate from
        // delayq.toml) belonged to the rate that was replaced: the new rate brings its own
        // default burst.
        let rank = |option: &str| c.get(option).map(|s| source_rank(&s.source));
        if let (Some(burst), Some(rate)) = (rank("burst"), rank("rate")) {
            if burst < rate {
                c.settings.retain(|s| s.option != "burst");
            }
        }
        c
    }

    fn stream(&self, r: &StreamListenerRegistration) -> ComponentConfig {
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

    fn leader_task(&self, r: &LeaderTaskRegistration) -> ComponentConfig {
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
    fn schedule(&self, r: &ScheduleRegistration) -> Result<ComponentConfig> {
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
                    "misfire_after" => Some(Parsed::Ms(r.misfire_after_ms)),
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
        "backoff" => Parsed::Backoff(o.backoff),
        "timeout" => return o.timeout_ms.map(Parsed::Ms),
        "rate" => return o.flow.rate.map(Parsed::Rate),
        "rate_per_key" => return o.flow.rate_per_key.map(Parsed::Rate),
        // The code's burst only when it is not the rate's default, so that a rate set in
        // delayq.toml or the environment brings its own default burst.
        "burst" => {
            return o
                .flow
                .rate
                .filter(|r| r.burst != r.default_burst())
                .map(|r| Parsed::Count(r.burst as u32))
        }
        "dead_max" => Parsed::Count(o.flow.dead_max),
        "dead_ttl" => Parsed::Ms(o.flow.dead_ttl_ms),
        "result_ttl" => Parsed::Ms(o.flow.result_ttl_ms),
        "results_max" => Parsed::Count(o.flow.results_max),
        _ => return None,
    })
}
