//! What an operator does to a schedule besides changing it: suspend it, resume it, or run it
//! now (the dashboard's buttons and `delayq schedules suspend|resume|run`).

use std::time::Duration;

use super::records::{record_key, tick_id, SCHEDULE_SCRIPTS};
use crate::delay::SendOptions;
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;
use crate::SendOutcome;

/// What suspending or resuming a schedule did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleChange {
    /// There is no such schedule.
    NotFound,
    /// Suspended (or resumed) now.
    Changed,
    /// It already was.
    Unchanged,
}

impl Producer {
    /// Suspends schedule `name`: no tick is produced until [`resume_schedule`]
    /// (a tick already written, at most about a second ahead, still runs). The state is kept
    /// in its record: every process sees it, and a runtime starting with a `#[scheduled]` fn
    /// keeps it suspended.
    ///
    /// [`resume_schedule`]: Producer::resume_schedule
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName); [`Error::Redis`](crate::Error::Redis)
    /// when Redis does not answer or refuses the call.
    pub async fn suspend_schedule(&self, name: &str) -> Result<ScheduleChange> {
        self.suspend_or_resume(name, true).await
    }

    /// Resumes a suspended schedule from its first tick after now: the ticks it missed while
    /// suspended are not caught up, whatever its `catch_up`.
    ///
    /// # Errors
    /// As [`suspend_schedule`](Producer::suspend_schedule); [`Error::InvalidSchedule`] when
    /// its record cannot be used (see `schedules`).
    pub async fn resume_schedule(&self, name: &str) -> Result<ScheduleChange> {
        self.suspend_or_resume(name, false).await
    }

    async fn suspend_or_resume(&self, name: &str, suspend: bool) -> Result<ScheduleChange> {
        let Some((keys, fields)) = self.schedule_fields(name).await? else {
            return Ok(ScheduleChange::NotFound);
        };
        let mut inv = SCHEDULE_SCRIPTS.suspend.key(record_key(&keys, name));
        if suspend {
            inv.arg("suspend");
        } else {
            let calendar = super::records::schedule_of(&fields)?.calendar()?;
            let now = self.redis_now_ms().await?;
            let (first, anchor) = calendar.start_at(now, name)?;
            inv.arg("resume").arg(first).arg(anchor);
        }
        let out: String = self.conn.run_script(inv).await?;
        let change = match out.as_str() {
            "none" => return Ok(ScheduleChange::NotFound),
            "suspended" | "resumed" => ScheduleChange::Changed,
            _ => ScheduleChange::Unchanged,
        };
        if change == ScheduleChange::Changed {
            // Every runtime reads the record again (the change log), at once.
            self.index_changed(name, Some(&keys.topic), &[&keys.topic])
                .await?;
        }
        Ok(change)
    }

    /// Runs schedule `name` once now, besides its ticks: a tick due now goes to its topic,
    /// with its payload (`{"missed":0}` for a `#[scheduled]` fn's), and its handler gets it as
    /// any tick (`Tick::scheduled_at` now). Its next ticks stay as they were; a suspended
    /// schedule runs too. `None` when there is no such schedule.
    ///
    /// # Errors
    /// As [`suspend_schedule`](Producer::suspend_schedule).
    pub async fn run_schedule_now(&self, name: &str) -> Result<Option<MessageId>> {
        let Some((keys, fields)) = self.schedule_fields(name).await? else {
            return Ok(None);
        };
        let now = self.redis_now_ms().await?;
        let id = tick_id(name, now);
        // The stored payload as it is (JSON the producer encoded), not parsed and re-encoded.
        let payload = fields
            .get("payload")
            .cloned()
            .unwrap_or_else(|| r#"{"missed":0}"#.to_string());
        let payload = serde_json::value::RawValue::from_string(payload)
            .map_err(|e| Error::unexpected("a schedule's payload", &e.to_string()))?;
        let options = SendOptions::new().id(id.as_str()).delay(Duration::ZERO);
        match self.send_with(&keys.topic, &payload, options).await? {
            SendOutcome::Created(id) | SendOutcome::Duplicate(id) | SendOutcome::Replaced(id) => {
                Ok(Some(id))
            }
        }
    }
}
