//! Starting leader tasks: each contends for its leader lease.

use delayq_core::config::Kind;

use super::context::{summary, Spawning};
use crate::leader::{self, LeaderTaskRegistration};
use crate::runtime::config::EffectiveConfig;

/// Starts each leader task's loop (with its `every` and `ttl` in ms).
pub(super) fn start(
    s: &mut Spawning,
    tasks: Vec<(&'static LeaderTaskRegistration, (u64, u64))>,
    config: &EffectiveConfig,
) {
    for (registration, (every_ms, ttl_ms)) in tasks {
        let task = leader::run(
            registration,
            (every_ms, ttl_ms),
            s.producer.clone(),
            s.stop.clone(),
        );
        s.spawn(task);
        tracing::info!(
            task = registration.name,
            function = registration.function,
            options = %summary(config, Kind::LeaderTask, registration.name),
            "contending for the leader lease"
        );
    }
}
