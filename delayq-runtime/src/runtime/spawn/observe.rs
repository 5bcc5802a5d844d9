//! Starting health and metrics: the Prometheus recorder, the readiness probe, the HTTP
//! endpoints that serve them, the gauges task and the history task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::Result;
use tokio_util::sync::CancellationToken;

use super::context::Spawning;
use crate::delay::TopicRuntime;
use crate::health::Health as Watch;
use crate::runtime::config::EffectiveConfig;
use crate::runtime::probe::{Probe, ReadyChecks};
use crate::runtime::serve::{self, Render};
use crate::runtime::{gauges, history};
use crate::schedule::FailingSchedules;
use crate::stream::StreamRuntime;

/// Installs the Prometheus recorder when `prometheus` is given: what renders the metrics.
/// Call it before any metric handle is made (handles keep the recorder they were made with).
#[cfg(feature = "prometheus")]
pub(super) fn install_metrics(prometheus: Option<SocketAddr>) -> Result<Option<Render>> {
    Ok(match prometheus {
        Some(addr) => {
            let handle = crate::meter::install_prometheus(addr)?;
            Some(Arc::new(move || handle.render()))
        }
        None => None,
    })
}

/// Without the `prometheus` feature there is nothing to render (`spawn` refuses the option).
#[cfg(not(feature = "prometheus"))]
pub(super) fn install_metrics(_: Option<SocketAddr>) -> Result<Option<Render>> {
    Ok(None)
}

/// The watch on Redis (the wake-up subscription reports to it) and the probe that answers
/// health and readiness from every component's state.
pub(super) fn probe(
    s: &Spawning,
    config: &EffectiveConfig,
    runtimes: (&[Arc<TopicRuntime>], &[Arc<StreamRuntime>]),
    ready_checks: ReadyChecks,
    schedules: Option<Arc<FailingSchedules>>,
) -> (Arc<Watch>, Arc<Probe>) {
    let redis_watch = Arc::new(Watch::new("Redis".to_string()));
    let probe = Arc::new(Probe::new(
        s.conn.clone(),
        redis_watch.clone(),
        &config.components,
        runtimes,
        ready_checks,
        schedules,
    ));
    (redis_watch, probe)
}

/// Binds the metrics and health endpoints; on an error nothing stays bound.
pub(super) async fn serve(
    metrics: (Option<SocketAddr>, Option<Render>),
    health: (Option<SocketAddr>, Arc<Probe>),
    serving: &CancellationToken,
) -> Result<()> {
    let served = serve::endpoints(metrics, health, serving.clone()).await;
    if served.is_err() {
        serving.cancel();
    }
    served
}

/// Starts the gauges task, every `every` (none when not given).
pub(super) fn start_gauges(
    s: &mut Spawning,
    runtimes: (&[Arc<TopicRuntime>], &[Arc<StreamRuntime>]),
    every: Option<Duration>,
) {
    if let Some(every) = every {
        let task = gauges::run(
            s.producer.clone(),
            (runtimes.0.to_vec(), runtimes.1.to_vec()),
            every,
            s.stop.clone(),
        );
        s.spawn(task);
    }
}

/// Starts the task that writes the histories once a minute.
pub(super) fn start_history(s: &mut Spawning, all: history::Histories) {
    let task = history::run(all, s.stop.clone());
    s.spawn(task);
}
