//! Starting delay listeners (and the listeners of `#[scheduled]` fns): register their topics,
//! build each topic's runtime, subscribe to the wake-ups, and start each topic's boss and back
//! pool.

use std::sync::Arc;
use std::time::Duration;

use delayq_core::config::Kind;
use delayq_core::protocol::{TopicKeys, TopicQueue};
use delayq_core::{Error, Result, Schedule};
use tokio::sync::{oneshot, Notify};

use super::context::{summary, Spawning};
use crate::delay::{back, boss, run_subscriber, ListenerRegistration, TopicRuntime};
use crate::health::Health as Watch;
use crate::options::ListenerOptions;
use crate::runtime::builder::Selection;
use crate::runtime::config::EffectiveConfig;
use crate::schedule::ScheduleRegistration;

/// How long `spawn` waits for the wake-up subscription before it returns anyway.
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(5);

/// The delay listeners to run, with their effective options: the selected ones and those of
/// the selected `#[scheduled]` fns; an error naming both functions when two share a topic.
pub(super) fn listeners(
    topics: &[(&'static ListenerRegistration, ListenerOptions)],
    schedules: &[(&'static ScheduleRegistration, Schedule, ListenerOptions)],
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

/// Registers the topics of `listeners` in the namespace.
pub(super) async fn register(
    s: &Spawning,
    listeners: &[(&'static ListenerRegistration, ListenerOptions)],
) -> Result<()> {
    for (r, options) in listeners {
        s.producer.register_topic(r.topic).await?;
        // What `delayq stats` shows as the topic's rate limit.
        let keys = TopicKeys::on(&s.conn, &s.namespace, r.topic)?;
        let queue = TopicQueue::new(s.conn.clone(), keys).with_flow(options.flow);
        queue.announce_flow().await?;
        // Whether a cancel keeps its outcome: when the listener keeps results (a value it
        // returns, or `ack_with`, which a manual listener may call).
        let handler = (r.handler)();
        queue
            .announce_results(handler.keeps() || handler.mode() == "manual")
            .await?;
    }
    Ok(())
}

/// Each topic's runtime (nothing claims yet).
pub(super) fn topics(
    s: &Spawning,
    listeners: &[(&'static ListenerRegistration, ListenerOptions)],
) -> Result<Vec<Arc<TopicRuntime>>> {
    let mut topics = Vec::new();
    for (registration, options) in listeners {
        let keys = TopicKeys::on(&s.conn, &s.namespace, registration.topic)?;
        let queue = TopicQueue::new(s.conn.clone(), keys).with_flow(options.flow);
        topics.push(TopicRuntime::new(
            registration,
            *options,
            queue,
            s.stop.clone(),
            s.abort.clone(),
        ));
    }
    Ok(topics)
}

/// Starts the pub/sub subscriber that wakes the topics' bosses and back pools (and the tick
/// producer, `schedules`); the receiver hears when the subscription is in place. `None` when
/// there is no topic.
pub(super) fn subscribe(
    s: &mut Spawning,
    topics: &[Arc<TopicRuntime>],
    schedules: Option<Arc<Notify>>,
    redis_watch: Arc<Watch>,
) -> Option<oneshot::Receiver<()>> {
    if topics.is_empty() {
        return None;
    }
    let (subscribed, ready) = oneshot::channel();
    let task = run_subscriber(
        s.conn.clone(),
        (topics.to_vec(), schedules),
        s.stop.clone(),
        subscribed,
        redis_watch,
    );
    s.spawn(task);
    Some(ready)
}

/// Starts each topic's boss and back pool, and says what each listens to.
pub(super) async fn start(
    s: &mut Spawning,
    topics: &[Arc<TopicRuntime>],
    selection: &Selection,
    config: &EffectiveConfig,
) {
    for t in topics {
        s.spawn(boss::run(t.clone()));
        s.spawn(back::run(t.clone()));
        // What this namespace holds for the topic: a producer writing under another
        // namespace shows up here as a topic with nothing in it.
        let found = s.producer.counts(&t.name).await.ok();
        let kind = if selection.schedules.iter().any(|r| r.name == &*t.name) {
            Kind::Schedule
        } else {
            Kind::Listener
        };
        tracing::info!(
            topic = %t.name,
            namespace = %s.namespace,
            function = t.registration.function,
            ack_mode = t.handler.mode(),
            options = %summary(config, kind, &t.name),
            delayed = found.map(|c| c.delayed),
            inflight = found.map(|c| c.inflight),
            dead = found.map(|c| c.dead),
            "listening"
        );
    }
}

/// Waits (a while) for the wake-up subscription: wake-ups published before it is in place
/// would be missed (bosses would catch up only at their safety sleep).
pub(super) async fn subscribed(ready: Option<oneshot::Receiver<()>>) {
    if let Some(ready) = ready {
        if tokio::time::timeout(SUBSCRIBE_WAIT, ready).await.is_err() {
            tracing::warn!("the wake-up subscription is not in place yet; new messages are found at the next safety check until it is");
        }
    }
}
