//! Time travel: `advance(d)` writes the ticks its schedules would write within `d`, then
//! moves every due time of its topics `d` earlier.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use delayq_core::protocol::{tick_id, travel, Produced};
use delayq_core::{Error, MessageId, Result};

use super::TestRuntime;

/// The most ticks of one schedule an advance writes: an advance of years over a frequent
/// schedule is refused with an error saying so, rather than writing millions of ticks.
pub const MAX_TICKS_PER_ADVANCE: usize = 100_000;

impl TestRuntime {
    /// `d` passes for everything that waits: every due time moves `d` earlier (delayed
    /// messages, far ones, retry backoffs, and the ticks of its schedules and of dynamic
    /// schedules on its topics), so what was due within `d` is due now, in due order, and the
    /// rest is `d` nearer; advances add up. Handlers see the original due times; claims in
    /// flight keep their ack deadlines. Returns once they are due (call
    /// [`run_until_idle`](Self::run_until_idle) to let them run).
    ///
    /// # Errors
    /// [`Error::Redis`] when the test's Redis does not answer; [`Error::Config`] when `d`
    /// passes more than [`MAX_TICKS_PER_ADVANCE`] ticks of one schedule.
    pub async fn advance(&self, d: Duration) -> Result<()> {
        self.travel(d, false).await
    }

    /// [`advance`](Self::advance), and the ack deadlines of every claim in flight pass `d`
    /// too: a manual-ack handler that returned without acking, or a handler that hangs, is
    /// delivered again as if `d` had passed. A handler still running is treated as one that
    /// outlived its ack timeout: its message is delivered again alongside it, as in
    /// production when a handler outlives its lease. Use it once the handlers you mean to
    /// time out have returned, or to test that your handler copes with a redelivery.
    ///
    /// # Errors
    /// [`Error::Redis`] when the test's Redis does not answer.
    pub async fn advance_with_claims(&self, d: Duration) -> Result<()> {
        self.travel(d, true).await
    }

    async fn travel(&self, d: Duration, claims: bool) -> Result<()> {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 4);
        // Time passed in earlier advances: a tick written now at its nominal time is that
        // much nearer already.
        let before = self.offset_ms.fetch_add(ms, Ordering::SeqCst);
        let lead = before + ms;
        let now = self.producer.redis_now_ms().await?;
        let mut ticks: HashMap<String, Vec<MessageId>> = HashMap::new();
        for (name, topic) in self.producer.schedule_index().await? {
            if !self.topics.contains(&topic) {
                continue;
            }
            let Some(mut state) = self.producer.schedule_state_at(&name, &topic).await? else {
                continue;
            };
            let mut of_this = 0usize;
            loop {
                match self.producer.produce_ticks(&mut state, now, lead).await? {
                    Produced::Ticks { ticks: written, .. } => {
                        of_this += written.len();
                        let ids = ticks.entry(topic.clone()).or_default();
                        ids.extend(written.iter().map(|t| tick_id(&name, *t)));
                        if state.next > now + lead {
                            break;
                        }
                        if of_this >= MAX_TICKS_PER_ADVANCE {
                            return Err(Error::Config(format!(
                                "advance({d:?}) passes more than {MAX_TICKS_PER_ADVANCE} ticks of schedule {name:?}: advance less at a time, or leave the schedule out (TestRuntime::builder().schedules([..])); the {of_this} written so far wait at their times"
                            )));
                        }
                    }
                    // Refreshed from the record: go on from its next tick.
                    Produced::Stale => {}
                    Produced::Changed => {
                        match self.producer.schedule_state_at(&name, &topic).await? {
                            Some(fresh) => state = fresh,
                            None => break,
                        }
                    }
                    Produced::Gone | Produced::NotYet => break,
                }
            }
        }
        for topic in &self.topics {
            let written = ticks.get(topic).map(Vec::as_slice).unwrap_or_default();
            travel(&self.producer, topic, ms, written, before, claims).await?;
        }
        Ok(())
    }
}
