//! The runtime's metrics, through the `metrics` facade (names in API.md, "Operating it"):
//! handled outcomes, lateness, running handlers, and the pending and dead gauges. Handles are
//! made once per topic or stream, so recording is a few atomic adds; with no recorder
//! installed they do nothing. Install a recorder before `spawn()`: handles made earlier stay
//! with the no-op one.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime};

use delayq_core::protocol::Tally;
use metrics::{Counter, Gauge, Histogram};

/// What the history writer takes once a minute (`runtime/history.rs`): the same events as
/// the metrics, counted here whether or not a recorder is installed. A topic's, a stream
/// group's, or one schedule's ticks' (`TopicRuntime::tick_minute`).
#[derive(Default)]
pub(crate) struct Minute {
    ok: AtomicU64,
    retry: AtomicU64,
    dead: AtomicU64,
    timed_out: AtomicU64,
    lateness: [AtomicU64; delayq_core::LATENESS_BINS_MS.len() + 1],
}

impl Minute {
    pub(crate) fn handled(&self, outcome: Outcome, n: u64) {
        match outcome {
            Outcome::Ok => self.ok.fetch_add(n, Relaxed),
            Outcome::Retry => self.retry.fetch_add(n, Relaxed),
            Outcome::Dead => self.dead.fetch_add(n, Relaxed),
        };
    }

    /// A handler started `late` after its due time.
    pub(crate) fn started(&self, late: Duration) {
        self.lateness[Tally::bin(late)].fetch_add(1, Relaxed);
    }

    /// What was counted since the last call, from zero again.
    pub(crate) fn take(&self) -> Tally {
        let mut t = Tally {
            ok: self.ok.swap(0, Relaxed),
            retry: self.retry.swap(0, Relaxed),
            dead: self.dead.swap(0, Relaxed),
            timed_out: self.timed_out.swap(0, Relaxed),
            ..Tally::default()
        };
        for (bin, n) in t.lateness.iter_mut().zip(&self.lateness) {
            *bin = n.swap(0, Relaxed);
        }
        t
    }

    /// Gives back what `take` took when it could not be written, for the next write.
    pub(crate) fn untake(&self, t: &Tally) {
        self.ok.fetch_add(t.ok, Relaxed);
        self.retry.fetch_add(t.retry, Relaxed);
        self.dead.fetch_add(t.dead, Relaxed);
        self.timed_out.fetch_add(t.timed_out, Relaxed);
        for (n, bin) in self.lateness.iter().zip(&t.lateness) {
            n.fetch_add(*bin, Relaxed);
        }
    }
}

/// What became of a handler run, as `delayq_handled_total{outcome}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Retry,
    Dead,
}

/// The metric handles of one topic, or of one stream's group.
pub(crate) struct Meter {
    ok: Counter,
    retry: Counter,
    dead: Counter,
    timed_out: Counter,
    dead_dropped: Counter,
    paused: Gauge,
    lateness: Histogram,
    inflight: Gauge,
    pending: Gauge,
    dead_now: Gauge,
    minute: Minute,
}

impl Meter {
    fn with_labels(labels: Vec<(&'static str, String)>) -> Self {
        let handled = |outcome: &'static str| {
            let mut l: Vec<metrics::Label> = labels
                .iter()
                .map(|(k, v)| metrics::Label::new(*k, v.clone()))
                .collect();
            l.push(metrics::Label::new("outcome", outcome));
            metrics::counter!("delayq_handled_total", l)
        };
        let plain = || -> Vec<metrics::Label> {
            labels
                .iter()
                .map(|(k, v)| metrics::Label::new(*k, v.clone()))
                .collect()
        };
        Meter {
            ok: handled("ok"),
            retry: handled("retry"),
            dead: handled("dead"),
            timed_out: metrics::counter!("delayq_timeouts_total", plain()),
            dead_dropped: metrics::counter!("delayq_dead_dropped_total", plain()),
            paused: metrics::gauge!("delayq_paused", plain()),
            lateness: metrics::histogram!("delayq_lateness_seconds", plain()),
            inflight: metrics::gauge!("delayq_inflight", plain()),
            pending: metrics::gauge!("delayq_pending", plain()),
            dead_now: metrics::gauge!("delayq_dead", plain()),
            minute: Minute::default(),
        }
    }

    /// The handles of `topic`.
    pub(crate) fn topic(topic: &str) -> Self {
        Self::with_labels(vec![("topic", topic.to_string())])
    }

    /// The handles of `group` on `stream`.
    pub(crate) fn stream(stream: &str, group: &str) -> Self {
        Self::with_labels(vec![
            ("stream", stream.to_string()),
            ("group", group.to_string()),
        ])
    }

    /// `n` deliveries settled with `outcome` (counted where the script said it happened, so
    /// a stale ack counts nothing).
    pub(crate) fn handled(&self, outcome: Outcome, n: u64) {
        match outcome {
            Outcome::Ok => self.ok.increment(n),
            Outcome::Retry => self.retry.increment(n),
            Outcome::Dead => self.dead.increment(n),
        }
        self.minute.handled(outcome, n);
    }

    /// What was counted for the history since the last take.
    pub(crate) fn minute(&self) -> &Minute {
        &self.minute
    }

    /// A run was stopped at its `timeout` (it is then retried or dead-lettered, and counted
    /// there too).
    pub(crate) fn timed_out(&self) {
        self.timed_out.increment(1);
        self.minute.timed_out.fetch_add(1, Relaxed);
    }

    /// Whether the topic is paused, as this process's boss last found it.
    pub(crate) fn paused(&self, paused: bool) {
        self.paused.set(if paused { 1.0 } else { 0.0 });
    }

    /// Dead letters dropped past the topic's bounds (`dead_max`, `dead_ttl`).
    pub(crate) fn dead_dropped(&self, n: u64) {
        if n > 0 {
            self.dead_dropped.increment(n);
        }
    }

    /// A handler starts on something due at `due` (a message's due time, an entry's id time):
    /// how late it starts.
    pub(crate) fn started(&self, due: SystemTime) -> Duration {
        let late = SystemTime::now()
            .duration_since(due)
            .unwrap_or(Duration::ZERO);
        self.lateness.record(late.as_secs_f64());
        self.minute.started(late);
        self.inflight.increment(1.0);
        late
    }

    /// A handler that `started` has returned (or was stopped).
    pub(crate) fn finished(&self) {
        self.inflight.decrement(1.0);
    }

    /// What Redis holds: waiting (delayed, or a stream group's undelivered) and dead.
    pub(crate) fn holding(&self, pending: u64, dead: u64) {
        self.pending.set(pending as f64);
        self.dead_now.set(dead as f64);
    }
}

/// Installs the Prometheus recorder, once per process (the `metrics` facade has one global
/// recorder): a runtime started again after a refused start, or a second runtime of the
/// process, gets the handle of the first. The runtime's endpoint serves what the returned
/// handle renders at `/metrics`.
#[cfg(feature = "prometheus")]
pub(crate) fn install_prometheus(
    addr: std::net::SocketAddr,
) -> delayq_core::Result<metrics_exporter_prometheus::PrometheusHandle> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
    static INSTALLED: std::sync::Mutex<Option<PrometheusHandle>> = std::sync::Mutex::new(None);
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(handle) = installed.as_ref() {
        return Ok(handle.clone());
    }
    const LATENESS_BUCKETS: &[f64] = &[
        0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
    ];
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("delayq_lateness_seconds".into()),
            LATENESS_BUCKETS,
        )
        .and_then(|b| b.install_recorder())
        .map(|handle| installed.insert(handle).clone())
        .map_err(|e| {
            delayq_core::Error::Config(format!(
                "cannot serve Prometheus metrics on {addr}: {e} (is a metrics recorder installed already?)"
            ))
        })
}
