//! Spawning a runtime: resolve the settings, connect, check the namespace, then let each
//! system prepare (everything that can fail, before anything runs) and start its tasks, the
//! way tokio's `Builder::build` hands each kind of runtime to its own function.
//!
//! - `settings.rs`: the runtime's own settings and the components chosen to run.
//! - `context.rs`: what every system's start shares ([`Spawning`](context::Spawning)).
//! - `delay.rs`, `schedule.rs`, `stream.rs`, `leader.rs`, `room.rs`: each system's
//!   preparation and start.
//! - `observe.rs`: the metrics recorder, the health probe, their HTTP endpoints and the
//!   gauges.
//!
//! A new system adds its file here and one call in each phase of `spawn` it takes part in.

mod context;
mod delay;
mod leader;
mod observe;
mod room;
mod schedule;
mod settings;
mod stream;

use delayq_core::protocol::RedisConn;
use delayq_core::Result;
use tokio_util::sync::CancellationToken;

use super::builder::RuntimeBuilder;
use super::handle::{Parts, RuntimeHandle};
use context::Spawning;
use settings::Settings;

impl RuntimeBuilder {
    /// Reads the configuration (builder calls, environment, file, attributes), connects,
    /// checks the listeners, and starts the pools. Installs no signal handler unless given
    /// [`shutdown_on`](RuntimeBuilder::shutdown_on).
    ///
    /// # Errors
    /// [`Error::Config`](delayq_core::Error::Config) for a configuration problem (each named
    /// with its key, file and line or variable, and the nearest valid name), an unknown
    /// selection, or an address that cannot be bound; the connection's errors when Redis
    /// cannot be reached.
    pub async fn spawn(self) -> Result<RuntimeHandle> {
        let Settings {
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
        } = Settings::resolve(&self)?;

        let conn = RedisConn::connect(&url, origin).await?;
        warn_without_persistence(&conn).await;
        let producer = delayq_core::protocol::producer(conn.clone(), &namespace);
        producer.check_layout().await?;
        let render = observe::install_metrics(prometheus)?;
        let mut s = Spawning {
            conn,
            namespace,
            producer,
            stop: CancellationToken::new(),
            abort: CancellationToken::new(),
            tasks: Vec::new(),
        };
        let serving = CancellationToken::new();

        // Prepare: everything that can still fail, before anything runs. Start is all or
        // nothing: a failed spawn must leave no boss, reader or leader loop consuming behind it.
        // A #[scheduled] fn runs as the delay listener of its schedule's topic.
        let listeners = delay::listeners(&chosen.topics, &chosen.schedules)?;
        delay::register(&s, &listeners).await?;
        let ticks = schedule::prepare(&s, &chosen.schedules, &listeners).await?;
        let topics = delay::topics(&s, &listeners)?;
        let streams = stream::prepare(&s, chosen.streams).await?;
        let (redis_watch, probe) = observe::probe(
            &s,
            &config,
            (&topics, &streams),
            ready_checks,
            ticks.as_ref().map(|t| t.failing()),
        );
        let rooms = room::prepare(&s, &self.rooms).await?;
        observe::serve((prometheus, render), (health, probe.clone()), &serving).await?;

        // Start.
        let tick_wake = ticks.as_ref().map(|t| t.wake_handle());
        let subscribed = delay::subscribe(&mut s, &topics, tick_wake, redis_watch);
        tracing::info!(
            url = %s.conn.shown_url(),
            url_from = %origin,
            namespace = %s.namespace,
            config_file = config.file.as_ref().map(|p| p.display().to_string()),
            topics = topics.len(),
            streams = streams.len(),
            leader_tasks = chosen.leader_tasks.len(),
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
        stream::start(&mut s, &streams, &config);
        let history_rooms = rooms.iter().map(|(room, _)| room.clone()).collect();
        room::start(&mut s, rooms);
        schedule::start(&mut s, ticks);
        leader::start(&mut s, chosen.leader_tasks, &config);
        delay::start(&mut s, &topics, &selection, &config).await;
        observe::start_gauges(&mut s, (&topics, &streams), gauges_every);
        let histories = crate::runtime::history::Histories {
            topics: topics.clone(),
            streams: streams.clone(),
            rooms: history_rooms,
        };
        observe::start_history(&mut s, histories);
        // Return once the wake-up subscription is in place.
        delay::subscribed(subscribed).await;

        let shutdown_on = self
            .shutdown_on
            .as_ref()
            .and_then(|s| s.0.lock().unwrap_or_else(|p| p.into_inner()).take());
        Ok(RuntimeHandle::new(
            (topics, streams),
            Parts {
                tasks: s.tasks,
                producer: s.producer,
                cancel: (s.stop, s.abort, serving),
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
