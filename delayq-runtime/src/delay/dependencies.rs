//! `Dependencies`: a flow step's second parameter, what the steps it waited for ended with.

use std::future::Future;
use std::marker::PhantomData;

use delayq_core::protocol::TopicQueue;
use delayq_core::{Dependency, MessageId, StepState};
use serde::de::DeserializeOwned;

use super::message::TopicDelivery;
use crate::ack::Ack;
use crate::handler::{Decode, Failure, Handler, ListenerReturn, RunFuture};
use crate::mode::Auto;

/// What the steps a flow step waited for ended with: their values (kept for their topics'
/// `result_ttl`) and the failures it was told to ignore (`OnFailure::Ignore`). Take it as a
/// `#[delay_listener]`'s second parameter (the listener acks automatically); for a message
/// that is not a flow step's it is empty. A step can also add steps to its flow
/// ([`add_step`](Dependencies::add_step)).
///
/// ```no_run
/// use delayq_runtime::{delay_listener, Dependencies};
/// # #[derive(serde::Deserialize)] struct Publish { video: String }
/// #[delay_listener(topic = "video.publish")]
/// async fn publish(job: Publish, deps: Dependencies) -> Result<(), String> {
///     let sizes: Vec<String> = deps.results_of_prefix("transcode-")?;
///     let _ = (job.video, sizes);
///     Ok(())
/// }
/// # fn main() {}
/// ```
#[derive(Clone)]
pub struct Dependencies {
    deps: Vec<Dependency>,
    /// The step's message and its topic's queue (to add steps).
    from: MessageId,
    queue: TopicQueue,
}

impl std::fmt::Debug for Dependencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dependencies")
            .field("deps", &self.deps)
            .finish_non_exhaustive()
    }
}

/// A dependency's value that cannot be read as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyError {
    /// The step.
    pub step: String,
    /// Why.
    pub reason: String,
}

impl std::fmt::Display for DependencyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "dependency {:?}: {}", self.step, self.reason)
    }
}

impl std::error::Error for DependencyError {}

impl From<DependencyError> for String {
    fn from(e: DependencyError) -> String {
        e.to_string()
    }
}

impl Dependencies {
    /// Each step it waited for, in the order `after` named them.
    pub fn all(&self) -> &[Dependency] {
        &self.deps
    }

    /// The value step `name` returned: `None` when it failed (behind an Ignore edge) or its
    /// value is no longer kept. A step whose handler returns nothing keeps nothing: done, it
    /// reads as JSON `null` reads (`()`, an `Option`), and is an error for another `T`.
    ///
    /// # Errors
    /// [`DependencyError`] when `name` is not a step it waited for, or its value is not a `T`.
    pub fn result<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, DependencyError> {
        let Some(dep) = self.deps.iter().find(|d| d.name == name) else {
            return Err(DependencyError {
                step: name.to_string(),
                reason: "not a step this one waits for".into(),
            });
        };
        decode(dep)
    }

    /// The values of the steps whose names start with `prefix` and that succeeded, in the
    /// order `after` named them (a failed one, behind an Ignore edge, is left out).
    ///
    /// # Errors
    /// [`DependencyError`] when a value is not a `T`, or is no longer kept, or one has not
    /// ended (a run of an older gen, after `retry_flow`).
    pub fn results_of_prefix<T: DeserializeOwned>(
        &self,
        prefix: &str,
    ) -> Result<Vec<T>, DependencyError> {
        let mut out = Vec::new();
        for dep in self.deps.iter().filter(|d| d.name.starts_with(prefix)) {
            match dep.state {
                StepState::Done => {}
                // Failed behind an Ignore edge: left out (see `failed`).
                StepState::Failed => continue,
                // Not ended: this run is of an older gen, its dependencies run again.
                other => {
                    return Err(DependencyError {
                        step: dep.name.clone(),
                        reason: format!("it has not ended (it is {})", other.name()),
                    })
                }
            }
            match decode(dep)? {
                Some(v) => out.push(v),
                None => {
                    return Err(DependencyError {
                        step: dep.name.clone(),
                        reason: "its value is no longer kept (result_ttl, results_max)".into(),
                    })
                }
            }
        }
        Ok(out)
    }

    /// Adds step `name` (`payload` to `topic`, ready at once) to this step's flow: the steps
    /// that wait for this one wait for it too (one step per file of a folder, known only now).
    /// `false` when a step of that name exists (this run was retried and adds again).
    ///
    /// # Errors
    /// `Error::InvalidFlow` when this message is not a flow step's, its flow is not running,
    /// or the step is bad (name, topic, payload); `Error::Redis`.
    pub async fn add_step<T: serde::Serialize + ?Sized>(
        &self,
        name: &str,
        topic: &str,
        payload: &T,
    ) -> Result<bool, delayq_core::Error> {
        self.queue
            .add_flow_step(&self.from, name, topic, payload)
            .await
    }

    /// The steps it waited for that failed (behind Ignore edges), with why.
    pub fn failed(&self) -> impl Iterator<Item = (&str, &str)> {
        self.deps
            .iter()
            .filter(|d| d.state == StepState::Failed)
            .map(|d| (d.name.as_str(), d.reason.as_deref().unwrap_or("")))
    }
}

/// A done step's reason when its handler returned nothing (settle.lua's `NOTHING`).
const RETURNED_NOTHING: &str = "returned nothing";

fn decode<T: DeserializeOwned>(dep: &Dependency) -> Result<Option<T>, DependencyError> {
    let Some(json) = &dep.value else {
        // Its handler returned nothing (kept as nothing): it reads as JSON `null` reads, where
        // a `T` can (`()`, an `Option`); for another `T` it is an error, as a value of another
        // type is. Otherwise its value is no longer kept.
        if dep.state == StepState::Done && dep.reason.as_deref() == Some(RETURNED_NOTHING) {
            return serde_json::from_slice(b"null")
                .map(Some)
                .map_err(|e| DependencyError {
                    step: dep.name.clone(),
                    reason: format!(
                        "it returned nothing, which does not decode into {}: {e}",
                        std::any::type_name::<T>()
                    ),
                });
        }
        return Ok(None);
    };
    serde_json::from_slice(json)
        .map(Some)
        .map_err(|e| DependencyError {
            step: dep.name.clone(),
            reason: format!(
                "its value does not decode into {}: {e}",
                std::any::type_name::<T>()
            ),
        })
}

/// Marker for handlers `Fn(P, Dependencies) -> Fut` (auto ack).
pub struct WithDependencies<M, P>(PhantomData<fn() -> (M, P)>);

impl<F, Fut, P, M> Handler<TopicDelivery, WithDependencies<M, P>> for F
where
    F: Fn(P, Dependencies) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: ListenerReturn,
    P: Decode<M, TopicDelivery>,
{
    type Mode = Auto;

    fn keeps(&self) -> bool {
        <Fut::Output as ListenerReturn>::keeps()
    }

    fn call(&self, inbound: &TopicDelivery, _ack: Ack) -> Result<RunFuture, String> {
        let payload = P::decode(inbound)?;
        let handler = self.clone();
        let (queue, id) = (inbound.queue.clone(), inbound.delivery.id.clone());
        Ok(Box::pin(async move {
            let deps = queue
                .step_dependencies(&id)
                .await
                .map_err(|e| Failure::Error(format!("cannot read its dependencies: {e}")))?;
            let deps = Dependencies {
                deps,
                from: id,
                queue,
            };
            handler(payload, deps).await.into_failure()
        }))
    }
}
