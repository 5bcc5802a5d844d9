//! Where the ends that keep something go in batches, as the plain acks do (`ack_batcher.rs`):
//! acks that keep a value (`ack_keep.lua`; every flow step's ack, which notes the step's end
//! too), and the settling of ended flow steps in their flows (one `settle.lua` call a flow for
//! all its steps that ended together). A fan-in's steps end together: their acks and their
//! settles share calls instead of making one each.

use delayq_core::protocol::{Receipt, TopicQueue};
use delayq_core::{Error, MessageId, StepEnd};

use crate::ack_batcher::{AckBatcher, AckSink};

/// Acks that keep a value, in batches.
pub(crate) struct Keeping(pub(crate) TopicQueue);

impl AckSink for Keeping {
    type Item = (Receipt, Vec<u8>);
    async fn ack_all(&self, items: Vec<Self::Item>) -> Result<Vec<bool>, Error> {
        self.0.ack_keep(&items).await
    }
}

/// Flow steps' ends settled in their flows, in batches; answered `true` when settled (or not
/// a step's), `false` when left for the back pool's sweep (its note stays).
pub(crate) struct Settling(pub(crate) TopicQueue);

impl AckSink for Settling {
    type Item = (MessageId, StepEnd);
    async fn ack_all(&self, items: Vec<Self::Item>) -> Result<Vec<bool>, Error> {
        let report = self.0.settle_steps(&items).await;
        count(&self.0.keys().topic, &report);
        if let Some(e) = &report.error {
            tracing::warn!(error = %e, "flow steps' ends are not settled yet; the back pool's sweep will");
        }
        Ok(report.settled)
    }
}

/// Counts what settles of `topic`'s steps did: steps by outcome, flows by how they ended.
pub(crate) fn count(topic: &str, report: &delayq_core::Settled) {
    for (outcome, n) in [("done", report.done), ("failed", report.failed)] {
        if n > 0 {
            metrics::counter!("delayq_flow_steps_total", "topic" => topic.to_string(), "outcome" => outcome)
                .increment(n as u64);
        }
    }
    for state in &report.flows_ended {
        metrics::counter!("delayq_flows_ended_total", "state" => *state).increment(1);
    }
}

/// A topic's batchers of the ends that keep something.
#[derive(Clone)]
pub(crate) struct EndBatchers {
    pub(crate) keeps: AckBatcher<Keeping>,
    pub(crate) settles: AckBatcher<Settling>,
}

impl EndBatchers {
    pub(crate) fn spawn(queue: &TopicQueue) -> Self {
        EndBatchers {
            keeps: AckBatcher::spawn(Keeping(queue.clone())),
            settles: AckBatcher::spawn(Settling(queue.clone())),
        }
    }
}
