//! Starting stream listeners: register their streams, create their consumer groups, and start
//! each listener's reader and take-over.

use std::sync::Arc;

use delayq_core::config::Kind;
use delayq_core::protocol::StreamGroup;
use delayq_core::Result;

use super::context::{summary, Spawning};
use crate::runtime::config::EffectiveConfig;
use crate::stream::{reader, take_over, StreamListenerRegistration, StreamRuntime, StreamSettings};

/// Registers the streams, creates the groups that do not exist yet, and builds each
/// listener's runtime (nothing reads yet).
pub(super) async fn prepare(
    s: &Spawning,
    streams: Vec<(&'static StreamListenerRegistration, StreamSettings)>,
) -> Result<Vec<Arc<StreamRuntime>>> {
    for (r, ..) in &streams {
        // A stream entry keeps no result: a handler that returns a value would lose it.
        if (r.handler)().keeps() {
            return Err(delayq_core::Error::Config(format!(
                "stream listener {} of stream {:?} returns a value, but a stream entry keeps no result; return () or Result<(), E>",
                r.function, r.stream
            )));
        }
    }
    for (r, ..) in &streams {
        s.producer.register_stream(r.stream).await?;
    }
    let consumer = consumer_name();
    let mut out = Vec::new();
    for (registration, settings) in streams {
        let group = StreamGroup::new(
            s.conn.clone(),
            registration.stream,
            registration.group,
            &consumer,
        )?
        .with_dead_bounds(
            settings.options.flow.dead_max,
            settings.options.flow.dead_ttl_ms,
        );
        // Before spawn returns, so that what is published after it reaches a new group
        // that starts from `$`.
        if group.create(settings.from_start).await? {
            tracing::info!(
                stream = registration.stream,
                group = registration.group,
                "created the consumer group"
            );
        }
        out.push(StreamRuntime::new(
            registration,
            settings,
            group,
            s.stop.clone(),
            s.abort.clone(),
        ));
    }
    Ok(out)
}

/// Starts each listener's reader and take-over, and says what each consumes.
pub(super) fn start(s: &mut Spawning, streams: &[Arc<StreamRuntime>], config: &EffectiveConfig) {
    for l in streams {
        s.spawn(reader::run(l.clone(), s.conn.clone()));
        s.spawn(take_over::run(l.clone()));
        tracing::info!(
            stream = %l.stream,
            group = %l.group_name,
            consumer = %l.group.consumer(),
            function = l.registration.function,
            ack_mode = l.handler.mode(),
            options = %summary(config, Kind::Stream, &format!("{}/{}", l.stream, l.group_name)),
            "consuming"
        );
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
