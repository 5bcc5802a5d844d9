//! Listing schedules: `schedules`, `schedule` and the stalled ones, read in pipelines with
//! the last ticks' states looked up concurrently.

use futures_util::StreamExt;

use super::info::{field_ms, info_of, ScheduleInfo, TickOutcome, STALLED_AFTER};
use super::records::{tick_id, Fields};
use super::spec::CatchUp;
use crate::delay::{state_of, MessageState, TopicKeys};
use crate::error::Result;
use crate::names::validate_name;
use crate::producer::Producer;

/// The fields of a record `schedules()` reads (not the payload).
const LISTED: &[&str] = &[
    "kind",
    "spec",
    "tz",
    "catch_up",
    "misfire_after",
    "owner",
    "next",
    "anchor",
    "last",
    "suspended",
];

/// Schedules whose last tick's state `schedules()` looks up at once.
const STATES_IN_FLIGHT: usize = 64;

impl Producer {
    /// Every schedule of the namespace, by name. A record that cannot be used is listed with
    /// its [`error`](ScheduleInfo::error), never failing the call. Records are read in
    /// pipelines and the last ticks' states concurrently, so the call takes a few round trips
    /// however many schedules there are.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        let index = self.schedule_index().await?;
        let now = self.redis_now_ms().await?;
        // Entries a producer could not have written (a hand-edited index) are errors of theirs.
        let (valid, invalid): (Vec<_>, Vec<_>) = index.into_iter().partition(|(name, topic)| {
            validate_name("schedule", name).is_ok()
                && TopicKeys::on(&self.conn, self.namespace(), topic).is_ok()
        });
        let records = self.records_some_fields(&valid, Some(LISTED)).await?;
        let mut found: Vec<(&str, TopicKeys, Fields)> = Vec::new();
        let mut invalid: Vec<(String, String, String)> = invalid
            .into_iter()
            .map(|(name, topic)| {
                let error = match validate_name("schedule", &name) {
                    Err(e) => e.to_string(),
                    Ok(()) => TopicKeys::on(&self.conn, self.namespace(), &topic)
                        .err()
                        .map(|e| e.to_string())
                        .unwrap_or_default(),
                };
                (name, topic, error)
            })
            .collect();
        for ((name, topic), read) in valid.iter().zip(records) {
            match read {
                Ok(Some((keys, fields))) => found.push((name.as_str(), keys, fields)),
                Ok(None) => {} // removed meanwhile
                Err(error) => invalid.push((name.clone(), topic.clone(), error)),
            }
        }
        // Each future owns what it reads (a borrowing closure would not be `Send` for callers
        // that spawn this).
        let calls: Vec<_> = found
            .iter()
            .map(|(name, keys, fields)| {
                let (name, keys, last) = (name.to_string(), keys.clone(), field_ms(fields, "last"));
                async move { self.last_outcome(&name, &keys, last).await }
            })
            .collect();
        let outcomes: Vec<Result<Option<TickOutcome>>> = futures_util::stream::iter(calls)
            .buffered(STATES_IN_FLIGHT)
            .collect()
            .await;
        let mut out = Vec::with_capacity(found.len() + invalid.len());
        for ((name, keys, fields), outcome) in found.iter().zip(outcomes) {
            out.push(info_of(name, keys.clone(), fields, outcome?, now));
        }
        for (name, topic, error) in invalid {
            out.push(ScheduleInfo {
                name,
                spec: String::new(),
                tz: String::new(),
                catch_up: CatchUp::Last,
                misfire_after: super::spec::DEFAULT_MISFIRE_AFTER,
                topic,
                next_at: None,
                last_at: None,
                last_outcome: None,
                from_code: false,
                stalled: false,
                suspended: false,
                error: Some(error),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The schedules that are [stalled](ScheduleInfo::stalled) now, by name: the index and
    /// each record's `next` only, in pipelines (what a runtime's gauges read each period).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    #[doc(hidden)]
    pub async fn stalled_schedules(&self) -> Result<Vec<String>> {
        let index: Vec<(String, String)> = self
            .schedule_index()
            .await?
            .into_iter()
            .filter(|(name, topic)| {
                validate_name("schedule", name).is_ok()
                    && TopicKeys::on(&self.conn, self.namespace(), topic).is_ok()
            })
            .collect();
        let now = self.redis_now_ms().await?;
        let stall_ms = STALLED_AFTER.as_millis() as u64;
        let records = self
            .records_some_fields(&index, Some(&["next", "suspended"]))
            .await?;
        Ok(index
            .into_iter()
            .zip(records)
            .filter(|(_, read)| match read {
                Ok(None) => false, // removed meanwhile
                Ok(Some((_, fields))) => {
                    fields.get("suspended").is_none_or(|s| s != "1")
                        && field_ms(fields, "next").is_none_or(|n| n.saturating_add(stall_ms) < now)
                }
                Err(_) => true,
            })
            .map(|((name, _), _)| name)
            .collect())
    }

    /// Schedule `name`, if there is one (a record that cannot be used: with its
    /// [`error`](ScheduleInfo::error)).
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName); [`Error::Redis`](crate::Error::Redis)
    /// when Redis does not answer or refuses the call.
    pub async fn schedule(&self, name: &str) -> Result<Option<ScheduleInfo>> {
        match self.schedule_fields(name).await? {
            Some((keys, fields)) => {
                let now = self.redis_now_ms().await?;
                let outcome = self
                    .last_outcome(name, &keys, field_ms(&fields, "last"))
                    .await?;
                Ok(Some(info_of(name, keys, &fields, outcome, now)))
            }
            None => Ok(None),
        }
    }

    /// What became of a record's last tick.
    async fn last_outcome(
        &self,
        name: &str,
        keys: &TopicKeys,
        last: Option<u64>,
    ) -> Result<Option<TickOutcome>> {
        let Some(at) = last else {
            return Ok(None);
        };
        Ok(Some(
            match state_of(&self.conn, keys, &tick_id(name, at)).await? {
                MessageState::Delayed { attempt: 0 } => TickOutcome::Pending,
                MessageState::Delayed { .. } => TickOutcome::Retrying,
                MessageState::InFlight => TickOutcome::Running,
                MessageState::Dead => TickOutcome::Dead,
                MessageState::Gone => TickOutcome::Done,
            },
        ))
    }
}
