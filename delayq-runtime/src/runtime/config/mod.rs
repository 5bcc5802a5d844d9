//! External configuration resolved against this binary's registrations: for every option of
//! the runtime and of each listener, stream listener, leader task and schedule, the value of
//! the highest source that sets it (builder > environment > file > attribute > default), and
//! where it came from. Unknown names and bad values refuse start, each problem named.

mod components;
mod env;
mod linked;
mod sources;

pub(super) use components::Chosen;
pub(super) use sources::Sources;

use delayq_core::config::{ConfigSource, Kind, Parsed, Scope};
use delayq_core::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;

use crate::options::{Flow, ListenerOptions};
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

    /// A delay listener's rate limit and dead-letter bounds (the defaults for other kinds).
    fn flow(&self) -> Result<Flow> {
        let mut flow = Flow::default();
        if let Some(Parsed::Count(n)) = self.get("dead_max").map(|s| &s.parsed) {
            flow.dead_max = *n;
        }
        if let Some(Parsed::Ms(ms)) = self.get("dead_ttl").map(|s| &s.parsed) {
            flow.dead_ttl_ms = *ms;
        }
        if let Some(Parsed::Ms(ms)) = self.get("result_ttl").map(|s| &s.parsed) {
            flow.result_ttl_ms = *ms;
        }
        if let Some(Parsed::Count(n)) = self.get("results_max").map(|s| &s.parsed) {
            flow.results_max = *n;
        }
        flow.rate = match self.get("rate").map(|s| &s.parsed) {
            Some(Parsed::Rate(r)) => Some(*r),
            _ => None,
        };
        flow.rate_per_key = match self.get("rate_per_key").map(|s| &s.parsed) {
            Some(Parsed::Rate(r)) => Some(*r),
            _ => None,
        };
        if let Some(burst) = self.get("burst") {
            let refuse = |reason: String| {
                Error::Config(format!(
                    "{} {}: burst ({}): {reason}",
                    self.kind.noun(),
                    self.name,
                    burst.source
                ))
            };
            let Parsed::Count(n) = burst.parsed else {
                unreachable!("burst is a count: {:?}", burst.parsed)
            };
            let Some(rate) = flow.rate else {
                return Err(refuse(
                    "a burst needs a rate (rate = \"100/s\"); this listener has none".into(),
                ));
            };
            flow.rate = Some(
                rate.with_burst(u64::from(n))
                    .map_err(|e| refuse(e.reason))?,
            );
        }
        Ok(flow)
    }

    /// The listener options (for a stream: `max_deliveries` and `min_idle`).
    pub(crate) fn listener_options(&self) -> Result<ListenerOptions> {
        let (attempts, lease) = match self.kind {
            Kind::Stream => ("max_deliveries", "min_idle"),
            _ => ("max_attempts", "ack_timeout"),
        };
        let backoff = match self.get("backoff").map(|s| &s.parsed) {
            Some(Parsed::Backoff(b)) => *b,
            other => unreachable!("backoff: {other:?}"),
        };
        Ok(ListenerOptions {
            concurrency: self.count("concurrency"),
            max_attempts: self.count(attempts),
            ack_timeout_ms: self.ms(lease),
            backoff,
            timeout_ms: self.get("timeout").map(|s| match &s.parsed {
                Parsed::Ms(ms) => *ms,
                other => unreachable!("timeout is a duration: {other:?}"),
            }),
            flow: self.flow()?,
        })
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
        schedule
            .tz(self.text("tz").unwrap_or("UTC"))?
            .catch_up(catch_up)
            .misfire_after(std::time::Duration::from_millis(self.ms("misfire_after")))
    }
}

/// The values a source sets, by component and option.
#[derive(Default)]
pub(super) struct Layer {
    pub(super) values: HashMap<(Scope, &'static str), (Parsed, ConfigSource)>,
}
