//! `Tick`: what a `#[scheduled]` fn is called with.

use std::sync::Arc;
use std::time::SystemTime;

use delayq_core::protocol::{ms_to_time, tick_time};

use crate::delay::TopicDelivery;
use crate::handler::Decode;

/// One tick of a schedule, as a `#[scheduled]` fn gets it.
#[derive(Debug, Clone)]
pub struct Tick {
    name: Arc<str>,
    scheduled_at: SystemTime,
    attempt: u32,
    missed: u64,
}

impl Tick {
    /// The schedule's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tick's nominal time (a catch-up tick's is in the past; a retry keeps it).
    pub fn scheduled_at(&self) -> SystemTime {
        self.scheduled_at
    }

    /// Which run of this tick this is: 1 on the first.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Ticks skipped by the catch-up policy right before this one (0 when none was).
    pub fn missed(&self) -> u64 {
        self.missed
    }
}

/// Marker: the parameter is a `Tick`.
pub enum ViaTick {}

#[derive(serde::Deserialize)]
struct TickPayload {
    #[serde(default)]
    missed: u64,
}

impl Decode<ViaTick, TopicDelivery> for Tick {
    fn decode(inbound: &TopicDelivery) -> Result<Self, String> {
        let envelope = &inbound.delivery.envelope;
        let payload: TickPayload = serde_json::from_slice(&envelope.payload)
            .map_err(|e| format!("not a tick of a #[scheduled] fn: {e}"))?;
        Ok(Tick {
            name: inbound.topic.clone(),
            // The nominal time is in the tick's id; the envelope's due time moves with retries.
            scheduled_at: ms_to_time(
                tick_time(inbound.delivery.id.as_str()).unwrap_or(envelope.due_ms),
            ),
            attempt: envelope.attempt,
            missed: payload.missed,
        })
    }
}
