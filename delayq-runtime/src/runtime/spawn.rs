//! Spawning a runtime: connect, check the namespace, register the selected listeners, and start
//! every system's tasks.

use std::time::Duration;

use delayq_core::protocol::{
    namespace_from_env, redis_url_from_env, validate_namespace, RedisConn, StreamGroup, TopicKeys,
    TopicQueue,
};
use delayq_core::{Error, Result, UrlOrigin, WaitingRoom};
use tokio_util::sync::CancellationToken;

use super::builder::RuntimeBuilder;
use super::handle::RuntimeHandle;
use crate::delay::{back, boss, run_subscriber, ListenerRegistration, TopicRuntime};
use crate::leader;
use crate::room;
use crate::schedule::{self, ScheduleRegistration};
use crate::stream::{reader, take_over, StreamRuntime};

const SUBSCRIBE_WAIT: Duration = Duration::from_secs(5);

impl RuntimeBuilder {
    /// Connects, checks the listeners, and starts the pools. Installs no signal handler.
    pub async fn spawn(self) -> Result<RuntimeHandle> {
        let selection = self.selected()?;
        let (url, origin) = match &self.redis_url {
            Some(url) => (url.clone(), UrlOrigin::Builder),
            None => redis_url_from_env(),
        };
        let namespace = self.namespace.clone().unwrap_or_else(namespace_from_env);
        validate_namespace(&namespace)?;
        let conn = RedisConn::connect(&url, origin).await?;
        warn_without_persistence(&conn).await;
        let producer = delayq_core::protocol::producer(conn.clone(), &namespace);
        producer.check_layout().await?;
        // Before any metric handle is made: handles keep the recorder they were made with.
        #[cfg(feature = "prometheus")]
        if let Some(addr) = self.prometheus {
            crate::meter::install_prometheus(addr)?;
            tracing::info!(%addr, "serving Prometheus metrics at /metrics");
        }
        // A #[scheduled] fn runs as the delay listener of its schedule's topic.
        let listeners = listeners(&selection.topics, &selection.schedules)?;
        for r in &listeners {
            producer.register_topic(r.topic).await?;
        }
        for r in &selection.schedules {
            producer
                .upsert_code_schedule(r.name, &r.schedule()?)
                .await?;
        }
        // Ticks due now (a catch-up after an outage) are written before any listener claims.
        let tick_producer = if listeners.is_empty() {
            None
        } else {
            let producing = schedule::Producing {
                code: selection
                    .schedules
                    .iter()
                    .map(|r| r.name.to_string())
                    .collect(),
                topics: listeners.iter().map(|r| r.topic.to_string()).collect(),
            };
            Some(schedule::TickProducer::first_pass(producer.clone(), producing).await?)
        };
        for r in &selection.streams {
            producer.register_stream(r.stream).await?;
        }

        let stop = CancellationToken::new();
        let abort = CancellationToken::new();
        let mut topics = Vec::new();
        for registration in listeners {
            let keys = TopicKeys::on(&conn, &namespace, registration.topic)?;
            let queue = TopicQueue::new(conn.clone(), keys);
            topics.push(TopicRuntime::new(
                registration,
                queue,
                stop.clone(),
                abort.clone(),
            ));
        }
        let consumer = consumer_name();
        let mut streams = Vec::new();
        for registration in selection.streams {
            let group = StreamGroup::new(
                conn.clone(),
                registration.stream,
                registration.group,
                &consumer,
            )?;
            // Before spawn returns, so that what is published after it reaches a new group
            // that starts from `$`.
            if group.create(registration.from_start).await? {
                tracing::info!(
                    stream = registration.stream,
                    group = registration.group,
                    "created the consumer group"
                );
            }
            streams.push(StreamRuntime::new(
                registration,
                group,
                stop.clone(),
                abort.clone(),
            ));
        }
        let (subscribed, ready) = tokio::sync::oneshot::channel();
        let mut tasks = Vec::new();
        if !topics.is_empty() {
            tasks.push(tokio::spawn(run_subscriber(
                conn.clone(),
                topics.clone(),
                stop.clone(),
                subscribed,
            )));
        }
        tracing::info!(
            url = %conn.shown_url(),
            url_from = %origin,
            namespace = %namespace,
            topics = topics.len(),
            streams = streams.len(),
            leader_tasks = selection.leader_tasks.len(),
            "delayq runtime starting"
        );
        for s in &streams {
            tasks.push(tokio::spawn(reader::run(s.clone(), conn.clone())));
            tasks.push(tokio::spawn(take_over::run(s.clone())));
            tracing::info!(
                stream = %s.stream,
                group = %s.group_name,
                consumer = %s.group.consumer(),
                function = s.registration.function,
                concurrency = s.options.concurrency,
                ack_mode = s.handler.mode(),
                "consuming"
            );
        }
        for (name, config) in &self.rooms {
            let room = WaitingRoom::new(&producer, name, *config)?;
            room.register().await?;
            tracing::info!(room = %name, tick = ?config.tick_every(), "ticking the waiting room");
            tasks.push(tokio::spawn(room::tick_room(room, stop.clone())));
        }
        if let Some(ticks) = tick_producer {
            tasks.push(tokio::spawn(ticks.run(stop.clone())));
        }
        for registration in selection.leader_tasks {
            tasks.push(tokio::spawn(leader::run(
                registration,
                producer.clone(),
                stop.clone(),
            )));
            tracing::info!(
                task = registration.name,
                function = registration.function,
                every_ms = registration.every_ms,
                "contending for the leader lease"
            );
        }
        for t in &topics {
            tasks.push(tokio::spawn(boss::run(t.clone())));
            tasks.push(tokio::spawn(back::run(t.clone())));
            // What this namespace holds for the topic: a producer writing under another
            // namespace shows up here as a topic with nothing in it.
            let found = producer.counts(&t.name).await.ok();
            tracing::info!(
                topic = %t.name,
                namespace = %namespace,
                function = t.registration.function,
                concurrency = t.options.concurrency,
                ack_mode = t.handler.mode(),
                delayed = found.map(|c| c.delayed),
                inflight = found.map(|c| c.inflight),
                dead = found.map(|c| c.dead),
                "listening"
            );
        }
        if let Some(every) = self.gauges_every {
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
        Ok(RuntimeHandle::new(
            (topics, streams),
            tasks,
            producer,
            (stop, abort),
            self.shutdown_grace,
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

/// The delay listeners to run: the selected ones and those of the selected `#[scheduled]` fns;
/// an error naming both functions when two share a topic.
fn listeners(
    topics: &[&'static ListenerRegistration],
    schedules: &[&'static ScheduleRegistration],
) -> Result<Vec<&'static ListenerRegistration>> {
    let mut all: Vec<&'static ListenerRegistration> = topics.to_vec();
    for s in schedules {
        if let Some(other) = all.iter().find(|r| r.topic == s.listener.topic) {
            return Err(Error::DuplicateListener {
                topic: format!("topic {:?}", s.name),
                first: other.function.to_string(),
                second: s.listener.function.to_string(),
            });
        }
        all.push(&s.listener);
    }
    Ok(all)
}
