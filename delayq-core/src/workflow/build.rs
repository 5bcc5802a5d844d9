//! [`Flow`]: the steps of a workflow and the edges between them, checked before anything is
//! written.

use std::time::Duration;

use serde::Serialize;

use crate::delay::Priority;

/// The most steps a flow may have.
pub const MAX_FLOW_STEPS: usize = 10_000;
/// How long a flow is kept once it ended, unless [`Flow::ttl`] says otherwise: 7 days.
pub(crate) const FLOW_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// What a step does when a step it waits for fails (is dead, or failed behind its own edges).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// The step never runs: it and the flow fail, with the failing step's reason (the default
    /// of every edge; nothing waits forever).
    #[default]
    Fail,
    /// The step runs once the rest of what it waits for ended, the failure notwithstanding.
    Ignore,
}

impl OnFailure {
    pub(crate) fn word(self) -> &'static str {
        match self {
            OnFailure::Fail => "fail",
            OnFailure::Ignore => "ignore",
        }
    }
}

/// One step as written.
#[derive(Debug)]
pub(crate) struct StepSpec {
    pub(crate) name: String,
    pub(crate) topic: String,
    pub(crate) payload: std::result::Result<Vec<u8>, String>,
    pub(crate) after: Vec<(String, OnFailure)>,
    pub(crate) delay: Duration,
    pub(crate) priority: Option<Priority>,
    pub(crate) key: Option<String>,
    pub(crate) max_attempts: Option<u32>,
}

/// A workflow: steps over any topics, each waiting for the steps it names in
/// [`after`](Flow::after). Start it with `Producer::start_flow`. The methods after `step`
/// apply to the step written last.
///
/// ```
/// use delayq_core::{Flow, OnFailure};
/// let flow = Flow::new()
///     .step("transcode-720p", "video.transcode", &720)
///     .step("thumbnail", "video.thumbnail", &"cover")
///     .step("publish", "video.publish", &"v-7").after(["transcode-720p", "thumbnail"])
///         .if_failed("thumbnail", OnFailure::Ignore);
/// # let _ = flow;
/// ```
#[derive(Debug, Default)]
pub struct Flow {
    pub(crate) steps: Vec<StepSpec>,
    pub(crate) ttl: Option<Duration>,
    /// The first misuse of the builder (`after` before any step...), reported by start.
    pub(crate) misuse: Option<String>,
}

impl Flow {
    /// An empty flow.
    pub fn new() -> Self {
        Flow::default()
    }

    /// Adds step `name`: `payload` sent to `topic` once what it waits for has ended.
    pub fn step<T: Serialize + ?Sized>(mut self, name: &str, topic: &str, payload: &T) -> Self {
        self.steps.push(StepSpec {
            name: name.to_string(),
            topic: topic.to_string(),
            payload: serde_json::to_vec(payload).map_err(|e| e.to_string()),
            after: Vec::new(),
            delay: Duration::ZERO,
            priority: None,
            key: None,
            max_attempts: None,
        });
        self
    }

    fn last(&mut self, what: &str) -> Option<&mut StepSpec> {
        if self.steps.is_empty() && self.misuse.is_none() {
            self.misuse = Some(format!("{what} comes before any step"));
        }
        self.steps.last_mut()
    }

    /// The last step waits for these steps (each edge `OnFailure::Fail` unless
    /// [`if_failed`](Flow::if_failed) says otherwise).
    pub fn after<I, S>(mut self, steps: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        if let Some(s) = self.last("after") {
            for dep in steps {
                s.after.push((dep.as_ref().to_string(), OnFailure::Fail));
            }
        }
        self
    }

    /// What the last step does when `dependency` (one it waits for) fails.
    pub fn if_failed(mut self, dependency: &str, policy: OnFailure) -> Self {
        let mut unknown = None;
        if let Some(s) = self.last("if_failed") {
            match s.after.iter_mut().find(|(d, _)| d == dependency) {
                Some(edge) => edge.1 = policy,
                None => unknown = Some(s.name.clone()),
            }
        }
        if let (Some(step), None) = (unknown, &self.misuse) {
            self.misuse = Some(format!(
                "step {step:?}: if_failed names {dependency:?}, which it does not wait for (name it in after first)"
            ));
        }
        self
    }

    /// The last step is due this long after it becomes ready.
    pub fn delay(mut self, delay: Duration) -> Self {
        if let Some(s) = self.last("delay") {
            s.delay = delay;
        }
        self
    }

    /// The last step's priority.
    pub fn priority(mut self, priority: impl Into<Priority>) -> Self {
        if let Some(s) = self.last("priority") {
            s.priority = Some(priority.into());
        }
        self
    }

    /// The last step's message key (`SendOptions::key`).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        if let Some(s) = self.last("key") {
            s.key = Some(key.into());
        }
        self
    }

    /// The last step's `max_attempts`.
    pub fn max_attempts(mut self, n: u32) -> Self {
        if let Some(s) = self.last("max_attempts") {
            s.max_attempts = Some(n);
        }
        self
    }

    /// How long the flow is kept once it ended (default 7 days), with its steps' states.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
}
