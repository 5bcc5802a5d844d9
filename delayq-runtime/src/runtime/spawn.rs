//! Spawning a runtime: connect, check the namespace, register the selected listeners, and start
//! every system's tasks.

use std::time::Duration;

use delayq_core::protocol::{validate_namespace, RedisConn, StreamGroup, TopicKeys, TopicQueue};
use delayq_core::{Error, Result, UrlOrigin, WaitingRoom};
use tokio_util::sync::CancellationToken;

use delayq_core::config::{ConfigSource, Kind, Parsed};

use super::builder::RuntimeBuilder;
use super::config::{Chosen, Sources};
use super::gauges::PROMETHEUS_GAUGES_EVERY;
use super::handle::{Parts, RuntimeHandle};
use super::probe::{Probe, ReadyChecks};
use crate::delay::{back, boss, run_subscriber, ListenerRegistration, TopicRuntime};
use crate::health::Health as Watch;
use crate::leader;
use crate::options::ListenerOptions;
use crate::room;
use crate::schedule::{self, ScheduleRegistration};
use crate::stream::{reader, take_over, StreamRuntime};

const SUBSCRIBE_WAIT: Duration = Duration::from_secs(5);

impl RuntimeBuilder {
    /// Reads the configuration (builder calls, environment, file, attributes), connects,
    /// checks the listeners, and starts the pools. Installs no signal handler unless given
    /// [`shutdown_on`](RuntimeBuilder::shutdown_on).
    ///
    /// # Errors
    /// [`Error::Config`] for a configuration problem (each named with its key, file and line
    /// or variable, and the nearest valid name), an unknown selection, or an address that
    /// cannot be bound; the connection's errors when Redis cannot be reached.
    pub async fn spawn(self) -> Result<RuntimeHandle> {
        let selection = self.selected()?;
        let sources = Sources::read(
            self.config_file.as_deref(),
            std::env::vars_os(),
            &self.sets,
            self.external_config,
        )?;
        let mut config = sources.runtime(&self.runtime_values());
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
        let grace = duration("shutdown_grace").unwrap_or(super::builder::DEFAULT_SHUTDOWN_GRACE);
        let prometheus = addr("prometheus");
        let health_addr = addr("health");
        let ready_checks = ReadyChecks::from_option(&text("ready_checks"));
        let gauges_every = duration("gauges_every")
            .or(prometheus.map(|_| PROMETHEUS_GAUGES_EVERY))
            .map(|every| every.max(Duration::from_secs(1)));

        // Every selected component's options; the disabled ones stay in the report only.
        let Chosen {
            components,
            topics: topics_on,
            schedules: schedules_on,
            streams: streams_on,
            leader_tasks: leaders_on,
        } = sources.choose(&selection)?;
        config.components = components;
        #[cfg(not(feature = "prometheus"))]
        if let Some(addr) = prometheus {
            let from = config.runtime("prometheus").map(|s| s.source.to_string());
            return Err(Error::Config(format!(
                "prometheus = {addr:?} ({}) needs delayq-runtime's `prometheus` feature, which this build lacks",
                from.unwrap_or_default()
            )));
        }

        let conn = RedisConn::connect(&url, origin).await?;
        warn_without_persistence(&conn).await;
        let producer = delayq_core::protocol::producer(conn.clone(), &namespace);
        producer.check_layout().await?;
        // Before any metric handle is made: handles keep the recorder they were made with.
        #[cfg(feature = "prometheus")]
        let render: Option<super::serve::Render> = match prometheus {
            Some(addr) => {
                let handle = crate::meter::install_prometheus(addr)?;
                Some(std::sync::Arc::new(move || handle.render()))
            }
            None => None,
        };
        #[cfg(not(feature = "prometheus"))]
        let render: Option<super::serve::Render> = None;
        // A #[scheduled] fn runs as the delay listener of its schedule's topic.
        let listeners = listeners(&topics_on, &schedules_on)?;
        for (r, _) in &listeners {
            producer.register_topic(r.topic).await?;
        }
        for (r, schedule, _) in &schedules_on {
            producer.upsert_code_schedule(r.name, schedule).await?;
        }
        // Ticks due now (a catch-up after an outage) are written before any listener claims.
        let tick_producer = if listeners.is_empty() {
            None
        } else {
            let producing = schedule::Producing {
                code: schedules_on
                    .iter()
                    .map(|(r, ..)| r.name.to_string())
                    .collect(),
                topics: listeners.iter().map(|(r, _)| r.topic.to_string()).collect(),
            };
            Some(schedule::TickProducer::first_pass(producer.clone(), producing).await?)
        };
        for (r, ..) in &streams_on {
            producer.register_stream(r.stream).await?;
        }

        let stop = CancellationToken::new();
        let abort = CancellationToken::new();
        let serving = CancellationToken::new();
        let mut topics = Vec::new();
        for (registration, options) in &listeners {
            let keys = TopicKeys::on(&conn, &namespace, registration.topic)?;
            let queue = TopicQueue::new(conn.clone(), keys);
            topics.push(TopicRuntime::new(
                registration,
                *options,
                queue,
                stop.clone(),
                abort.clone(),
            ));
        }
        let consumer = consumer_name();
        let mut streams = Vec::new();
        for (registration, settings) in streams_on {
            let group = StreamGroup::new(
                conn.clone(),
                registration.stream,
                registration.group,
                &consumer,
            )?;
            // Before spawn returns, so that what is published after it reaches a new group
            // that starts from `$`.
            if group.create(settings.from_start).await? {
                tracing::info!(
                    stream = registration.stream,
                    group = registration.group,
                    "created the consumer group"
                );
            }
            streams.push(StreamRuntime::new(
                registration,
                settings,
                group,
                stop.clone(),
                abort.clone(),
            ));
        }
        let redis_watch = std::sync::Arc::new(Watch::new("Redis".to_string()));
        let probe = std::sync::Arc::new(Probe::new(
            conn.clone(),
            redis_watch.clone(),
            &config.components,
            (&topics, &streams),
            ready_checks,
            tick_producer.as_ref().map(|t| t.failing()),
        ));
        // Everything that can still fail, before anything runs: start is all or nothing (a
        // failed spawn must leave no boss, reader or leader loop consuming behind it).
        let mut rooms = Vec::new();
        for (name, config) in &self.rooms {
            let room = WaitingRoom::new(&producer, name, *config)?;
            room.register().await?;
            rooms.push((room, config.tick_every()));
        }
        if let Err(e) = super::serve::endpoints(
            (prometheus, render),
            (health_addr, probe.clone()),
            serving.clone(),
        )
        .await
        {
            serving.cancel();
            return Err(e);
        }
        let (subscribed, ready) = tokio::sync::oneshot::channel();
        let mut tasks = Vec::new();
        if !topics.is_empty() {
            tasks.push(tokio::spawn(run_subscriber(
                conn.clone(),
                (
                    topics.clone(),
                    tick_producer.as_ref().map(|t| t.wake_handle()),
                ),
                stop.clone(),
                subscribed,
                redis_watch,
            )));
        }
        tracing::info!(
            url = %conn.shown_url(),
            url_from = %origin,
            namespace = %namespace,
            config_file = config.file.as_ref().map(|p| p.display().to_string()),
            topics = topics.len(),
            streams = streams.len(),
            leader_tasks = leaders_on.len(),
            "delayq runtime starting"
        );
        for c in config.components.iter().filter(|c| !c.enabled) {
            let source = c.get("enabled").map(|s| s.source.to_string());
            tracing::info!(
                kind = ?c.kind,
                name = %c.name,
                function = c.function,
                from = source.unwrap_or_default(),
                "disabled by configuration"
            );
        }
        let summary = |kind: Kind, name: &str| {
            config
                .components
                .iter()
                .find(|c| c.kind == kind && c.name == name)
                .map(|c| c.summary())
                .unwrap_or_default()
        };
        for s in &streams {
            tasks.push(tokio::spawn(reader::run(s.clone(), conn.clone())));
            tasks.push(tokio::spawn(take_over::run(s.clone())));
            tracing::info!(
                stream = %s.stream,
                group = %s.group_name,
                consumer = %s.group.consumer(),
                function = s.registration.function,
                ack_mode = s.handler.mode(),
                options = %summary(Kind::Stream, &format!("{}/{}", s.stream, s.group_name)),
                "consuming"
            );
        }
        for (room, tick) in rooms {
            tracing::info!(room = %room.name(), ?tick, "ticking the waiting room");
            tasks.push(tokio::spawn(room::tick_room(room, stop.clone())));
        }
        if let Some(ticks) = tick_producer {
            tasks.push(tokio::spawn(ticks.run(stop.clone())));
        }
        for (registration, (every_ms, ttl_ms)) in leaders_on {
            tasks.push(tokio::spawn(leader::run(
                registration,
                (every_ms, ttl_ms),
                producer.clone(),
                stop.clone(),
            )));
            tracing::info!(
                task = registration.name,
                function = registration.function,
                options = %summary(Kind::LeaderTask, registration.name),
                "contending for the leader lease"
            );
        }
        for t in &topics {
            tasks.push(tokio::spawn(boss::run(t.clone())));
            tasks.push(tokio::spawn(back::run(t.clone())));
            // What this namespace holds for the topic: a producer writing under another
            // namespace shows up here as a topic with nothing in it.
            let found = producer.counts(&t.name).await.ok();
            let kind = if selection.schedules.iter().any(|r| r.name == &*t.name) {
                Kind::Schedule
            } else {
                Kind::Listener
            };
            tracing::info!(
                topic = %t.name,
                namespace = %namespace,
                function = t.registration.function,
                ack_mode = t.handler.mode(),
                options = %summary(kind, &t.name),
                delayed = found.map(|c| c.delayed),
                inflight = found.map(|c| c.inflight),
                dead = found.map(|c| c.dead),
                "listening"
            );
        }
        if let Some(every) = gauges_every {
            tasks.push(tokio::spawn(super::gauges::run(
                producer.clone(),
                (topics.clone(), streams.clone()),
                every,
                stop.clone(),
            )));
        }
        // Wake-ups published before the subscription is in place would be missed (bosses would
        // catch up only at their safety sleep), so return once it is.
        if !topics.is_empty() && tokio::time::timeout(SUBSCRIBE_WAIT, ready).await.is_err() {
            tracing::warn!("the wake-up subscription is not in place yet; new messages are found at the next safety check until it is");
        }
        let shutdown_on = self
            .shutdown_on
            .as_ref()
            .and_then(|s| s.0.lock().unwrap_or_else(|p| p.into_inner()).take());
        Ok(RuntimeHandle::new(
            (topics, streams),
            Parts {
                tasks,
                producer,
                cancel: (stop, abort, serving),
                grace,
                config,
                probe,
            },
            shutdown_on,
        ))
    }
}

async fn warn_without_persistence(conn: &RedisConn) {
    let reply: redis::RedisResult<Vec<String>> = conn
        .run(|mut c| async move {
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("appendonly")
                .query_async(&mut c)
                .await
        })
        .await;
    match reply {
        Ok(v) if v.get(1).map(String::as_str) == Some("no") => tracing::warn!(
            "Redis has appendonly off: a Redis crash or restart can lose messages sent since its last snapshot. Set `appendonly yes` (and appendfsync) for durable delays"
        ),
        Ok(_) => {}
        Err(error) => tracing::debug!(%error, "could not read Redis' appendonly setting"),
    }
}

/// A consumer name unique to this process: host, pid and a random suffix (a restarted process
/// is a new consumer; the old one is removed from the group once it is gone and holds nothing).
fn consumer_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
                .take(64)
                .collect::<String>()
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_string());
    format!("{host}-{}-{:04x}", std::process::id(), fastrand::u16(..))
}

/// The delay listeners to run, with their effective options: the selected ones and those of
/// the selected `#[scheduled]` fns; an error naming both functions when two share a topic.
fn listeners(
    topics: &[(&'static ListenerRegistration, ListenerOptions)],
    schedules: &[(
        &'static ScheduleRegistration,
        delayq_core::Schedule,
        ListenerOptions,
    )],
) -> Result<Vec<(&'static ListenerRegistration, ListenerOptions)>> {
    let mut all = topics.to_vec();
    for (s, _, options) in schedules {
        if let Some((other, _)) = all.iter().find(|(r, _)| r.topic == s.listener.topic) {
            return Err(Error::DuplicateListener {
                topic: format!("topic {:?}", s.name),
                first: other.function.to_string(),
                second: s.listener.function.to_string(),
            });
        }
        all.push((&s.listener, *options));
    }
    Ok(all)
}
