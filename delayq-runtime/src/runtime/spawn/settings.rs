//! The runtime's own settings, resolved from every source (builder calls, environment, file),
//! and the components chosen to run with their effective options.

use std::net::SocketAddr;
use std::time::Duration;

use delayq_core::config::{ConfigSource, Parsed};
use delayq_core::protocol::validate_namespace;
#[cfg(not(feature = "prometheus"))]
use delayq_core::Error;
use delayq_core::{Result, UrlOrigin};

use crate::runtime::builder::{RuntimeBuilder, Selection, DEFAULT_SHUTDOWN_GRACE};
use crate::runtime::config::{Chosen, EffectiveConfig, Sources};
use crate::runtime::gauges::PROMETHEUS_GAUGES_EVERY;
use crate::runtime::probe::ReadyChecks;

/// What `spawn` reads before it connects.
pub(super) struct Settings {
    pub(super) url: String,
    pub(super) origin: UrlOrigin,
    pub(super) namespace: String,
    pub(super) grace: Duration,
    pub(super) prometheus: Option<SocketAddr>,
    pub(super) health: Option<SocketAddr>,
    pub(super) ready_checks: ReadyChecks,
    pub(super) gauges_every: Option<Duration>,
    /// The registrations the builder selected (the disabled ones too).
    pub(super) selection: Selection,
    /// The effective configuration, every selected component's included.
    pub(super) config: EffectiveConfig,
    /// The enabled components, with their options (`components` is moved to `config`).
    pub(super) chosen: Chosen,
}

impl Settings {
    /// Reads the configuration (builder calls, environment, file, attributes) and checks it.
    pub(super) fn resolve(builder: &RuntimeBuilder) -> Result<Settings> {
        let selection = builder.selected()?;
        let sources = Sources::read(
            builder.config_file.as_deref(),
            std::env::vars_os(),
            &builder.sets,
            builder.external_config,
        )?;
        let mut config = sources.runtime(&builder.runtime_values());
        let text = |option: &str| match config.parsed(option) {
            Some(Parsed::Text(t)) => t.clone(),
            other => unreachable!("{option} is text: {other:?}"),
        };
        let duration = |option: &str| match config.parsed(option) {
            Some(Parsed::Ms(ms)) => Some(Duration::from_millis(*ms)),
            _ => None,
        };
        let addr = |option: &str| match config.parsed(option) {
            Some(Parsed::Addr(a)) => Some(*a),
            _ => None,
        };
        let url = match config.parsed("redis_url") {
            Some(Parsed::RedisUrl(u)) => u.expose().to_string(),
            other => unreachable!("redis_url is a URL: {other:?}"),
        };
        let origin = match config.runtime("redis_url").map(|s| &s.source) {
            Some(ConfigSource::Builder) => UrlOrigin::Builder,
            Some(ConfigSource::Environment { .. }) => UrlOrigin::Env,
            Some(ConfigSource::File { .. }) => UrlOrigin::File,
            _ => UrlOrigin::Default,
        };
        let namespace = text("namespace");
        validate_namespace(&namespace)?;
        let grace = duration("shutdown_grace").unwrap_or(DEFAULT_SHUTDOWN_GRACE);
        let prometheus = addr("prometheus");
        let health = addr("health");
        let ready_checks = ReadyChecks::from_option(&text("ready_checks"));
        let gauges_every = duration("gauges_every")
            .or(prometheus.map(|_| PROMETHEUS_GAUGES_EVERY))
            .map(|every| every.max(Duration::from_secs(1)));

        // Every selected component's options; the disabled ones stay in the report only.
        let mut chosen = sources.choose(&selection)?;
        config.components = std::mem::take(&mut chosen.components);
        #[cfg(not(feature = "prometheus"))]
        if let Some(addr) = prometheus {
            let from = config.runtime("prometheus").map(|s| s.source.to_string());
            return Err(Error::Config(format!(
                "prometheus = {addr:?} ({}) needs delayq-runtime's `prometheus` feature, which this build lacks",
                from.unwrap_or_default()
            )));
        }
        Ok(Settings {
            url,
            origin,
            namespace,
            grace,
            prometheus,
            health,
            ready_checks,
            gauges_every,
            selection,
            config,
            chosen,
        })
    }
}
