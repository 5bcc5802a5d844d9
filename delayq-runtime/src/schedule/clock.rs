//! Redis' clock as this machine estimates it (the ticks' times are Redis' clock).

use std::time::SystemTime;

use delayq_core::protocol::time_to_ms;
use delayq_core::Result;

/// Redis' clock as this machine estimates it: Redis' time at the last measurement, moved on
/// by this machine's monotonic clock since. A step of the machine's wall clock (an NTP
/// correction, a VM resumed) changes nothing here, so it can neither make the tick writer spin
/// on ticks it thinks are due nor sleep past ticks that are.
#[derive(Default)]
pub(super) struct Clock {
    measured: std::sync::Mutex<Option<(u64, std::time::Instant)>>,
}

fn local_ms() -> u64 {
    time_to_ms(SystemTime::now())
}

impl Clock {
    pub(super) fn now_ms(&self) -> u64 {
        match *self.measured.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((redis_ms, at)) => redis_ms + at.elapsed().as_millis() as u64,
            None => local_ms(),
        }
    }

    pub(super) async fn measure(&self, producer: &delayq_core::Producer) -> Result<()> {
        let before = std::time::Instant::now();
        let redis = producer.redis_now_ms().await?;
        // Redis read its clock about half way through the round trip.
        let at = before + before.elapsed() / 2;
        *self.measured.lock().unwrap_or_else(|p| p.into_inner()) = Some((redis, at));
        Ok(())
    }
}
