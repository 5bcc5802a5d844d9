//! [`Schedule`]: when a recurring job runs (a cron pattern in a time zone, or a fixed
//! interval) and what happens to ticks missed while no process ran ([`CatchUp`]).

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use delayq_spec::duration::format_ms;

use super::calendar::{parse_cron, zone, Calendar, MIN_EVERY};
use crate::error::{Error, Result};
use crate::time::{millis, ms_to_time, time_to_ms};

/// The most ticks `CatchUp::All` runs after an outage; older missed ticks are skipped (and
/// counted in the first tick's `missed`).
pub const CATCH_UP_ALL_MAX: usize = 100;

/// The default of [`Schedule::misfire_after`]: a tick produced more than a minute late counts as
/// missed (Quartz's misfire threshold is the same).
pub const DEFAULT_MISFIRE_AFTER: Duration =
    Duration::from_millis(delayq_spec::defaults::MISFIRE_AFTER_MS);
/// The shortest [`Schedule::misfire_after`].
const MIN_MISFIRE_AFTER: Duration =
    Duration::from_millis(delayq_spec::defaults::MIN_MISFIRE_AFTER_MS);

/// What runs of the ticks missed while no process produced them (the process was stopped,
/// Redis was unreachable). A tick counts as missed once it is more than the schedule's
/// [`misfire_after`](Schedule::misfire_after) late (a minute by default) by Redis' clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CatchUp {
    /// The latest missed tick runs once (its `missed()` says how many were skipped).
    #[default]
    Last,
    /// None runs; the next tick on time says how many were skipped.
    None,
    /// Each runs, oldest first, at most [`CATCH_UP_ALL_MAX`] of them.
    All,
}

impl CatchUp {
    /// `last`, `none` or `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Last => "last",
            CatchUp::None => "none",
            CatchUp::All => "all",
        }
    }
}

impl FromStr for CatchUp {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "last" => Ok(CatchUp::Last),
            "none" => Ok(CatchUp::None),
            "all" => Ok(CatchUp::All),
            other => Err(Error::InvalidSchedule {
                field: "catch_up".into(),
                reason: format!("{other:?}: use \"last\", \"none\" or \"all\""),
            }),
        }
    }
}

impl fmt::Display for CatchUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a schedule's ticks fall. Build with [`Schedule::cron`] or [`Schedule::every`], then
/// `.tz(..)`, `.catch_up(..)` and `.misfire_after(..)`.
///
/// ```
/// use delayq_core::{CatchUp, Schedule};
/// let s = Schedule::cron("0 9 * * MON-FRI")?.tz("Europe/Berlin")?.catch_up(CatchUp::None);
/// assert_eq!(s.spec(), "0 9 * * MON-FRI");
/// # Ok::<(), delayq_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Schedule {
    pub(crate) kind: Kind,
    pub(crate) tz: String,
    pub(crate) catch_up: CatchUp,
    pub(crate) misfire_after_ms: u64,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Cron(String),
    Every(u64),
}

impl Schedule {
    /// A cron pattern: 5 fields (minute hour day-of-month month day-of-week), or 6 with
    /// seconds first; names (`MON`–`SUN`, `JAN`–`DEC`) and `@hourly`, `@daily`, `@weekly`,
    /// `@monthly`, `@yearly`. In UTC unless `.tz(..)` says otherwise. Fails naming the field
    /// at fault (`Error::InvalidSchedule`).
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`](crate::Error::InvalidSchedule) naming the field at fault (`cron
    /// hour`, …).
    pub fn cron(pattern: &str) -> Result<Self> {
        parse_cron(pattern)?;
        Ok(Schedule {
            kind: Kind::Cron(pattern.trim().to_string()),
            tz: "UTC".into(),
            catch_up: CatchUp::default(),
            misfire_after_ms: millis(DEFAULT_MISFIRE_AFTER),
        })
    }

    /// Every `interval` (at least 10 ms), the first tick one interval after the schedule is
    /// created; the ticks stay on that grid across restarts.
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`](crate::Error::InvalidSchedule) for an interval under
    /// [`MIN_EVERY`](crate::MIN_EVERY).
    pub fn every(interval: Duration) -> Result<Self> {
        if interval < MIN_EVERY {
            return Err(Error::InvalidSchedule {
                field: "every".into(),
                reason: format!(
                    "{} is shorter than the shortest interval, 10ms",
                    delayq_spec::duration::format_duration(interval)
                ),
            });
        }
        Ok(Schedule {
            kind: Kind::Every(millis(interval)),
            tz: "UTC".into(),
            catch_up: CatchUp::default(),
            misfire_after_ms: millis(DEFAULT_MISFIRE_AFTER),
        })
    }

    /// The IANA time zone a cron pattern is read in (`Europe/Berlin`; default `UTC`).
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`](crate::Error::InvalidSchedule) for a name that is not an IANA
    /// time zone.
    pub fn tz(mut self, name: &str) -> Result<Self> {
        zone(name)?;
        self.tz = name.to_string();
        Ok(self)
    }

    /// What runs of ticks missed while no process ran (default [`CatchUp::Last`]).
    pub fn catch_up(mut self, catch_up: CatchUp) -> Self {
        self.catch_up = catch_up;
        self
    }

    /// How late a tick may be produced and still count as on time (default
    /// [`DEFAULT_MISFIRE_AFTER`], a minute; at least 100 ms), by Redis' clock: a tick later than
    /// this (no process ran, Redis was unreachable) is missed, and the catch-up policy decides
    /// whether it runs. A changed threshold does not move the ticks (an upsert keeps the next
    /// tick).
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`](crate::Error::InvalidSchedule) for a threshold under 100 ms.
    pub fn misfire_after(mut self, threshold: Duration) -> Result<Self> {
        if threshold < MIN_MISFIRE_AFTER {
            return Err(Error::InvalidSchedule {
                field: "misfire_after".into(),
                reason: format!(
                    "{} is shorter than the shortest threshold, 100ms",
                    delayq_spec::duration::format_duration(threshold)
                ),
            });
        }
        self.misfire_after_ms = millis(threshold);
        Ok(self)
    }

    /// The misfire threshold (see [`Schedule::misfire_after`]).
    pub fn misfire_threshold(&self) -> Duration {
        Duration::from_millis(self.misfire_after_ms)
    }

    /// The pattern as given, or `every <interval>`.
    pub fn spec(&self) -> String {
        match &self.kind {
            Kind::Cron(p) => p.clone(),
            Kind::Every(ms) => format!("every {}", format_ms(*ms)),
        }
    }

    /// The time zone's name.
    pub fn zone(&self) -> &str {
        &self.tz
    }

    /// The catch-up policy.
    pub fn catch_up_policy(&self) -> CatchUp {
        self.catch_up
    }

    /// The next `n` tick times after `after` (an interval counts from `after`), for showing a
    /// schedule; fewer when the pattern has no more before the year 10000.
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`](crate::Error::InvalidSchedule) when the pattern has no tick
    /// after `after` (such as 30 February).
    pub fn next_ticks(&self, after: SystemTime, n: usize) -> Result<Vec<SystemTime>> {
        let calendar = self.calendar()?;
        let from = time_to_ms(after);
        let anchor = match &self.kind {
            Kind::Every(ms) => from.saturating_add(*ms),
            Kind::Cron(_) => from,
        };
        let mut out = Vec::with_capacity(n);
        let mut at = from;
        while out.len() < n {
            match calendar.next_after(at, anchor) {
                Some(next) => {
                    out.push(ms_to_time(next));
                    at = next;
                }
                None => break,
            }
        }
        if out.is_empty() && n > 0 {
            return Err(Error::InvalidSchedule {
                field: self.stored().0.into(),
                reason: format!("{:?} has no tick after the time asked", self.spec()),
            });
        }
        Ok(out)
    }

    pub(crate) fn calendar(&self) -> Result<Calendar> {
        Ok(match &self.kind {
            Kind::Cron(p) => Calendar::cron(parse_cron(p)?, zone(&self.tz)?),
            Kind::Every(ms) => Calendar::Every(*ms),
        })
    }

    /// As stored in a schedule's record: (`cron`|`every`, the pattern or the ms).
    pub(crate) fn stored(&self) -> (&'static str, String) {
        match &self.kind {
            Kind::Cron(p) => ("cron", p.clone()),
            Kind::Every(ms) => ("every", ms.to_string()),
        }
    }

    /// Back from a record's fields (`misfire_after`: the stored ms, empty in a record from
    /// before the option: the default).
    pub(crate) fn from_stored(
        kind: &str,
        spec: &str,
        tz: &str,
        catch_up: &str,
        misfire_after: &str,
    ) -> Result<Self> {
        let schedule = match kind {
            "cron" => Schedule::cron(spec)?,
            "every" => Schedule::every(Duration::from_millis(spec.parse().map_err(|_| {
                Error::InvalidSchedule {
                    field: "every".into(),
                    reason: format!("stored interval {spec:?} is not a number of ms"),
                }
            })?))?,
            other => {
                return Err(Error::InvalidSchedule {
                    field: "kind".into(),
                    reason: format!("stored kind {other:?} is neither cron nor every"),
                })
            }
        };
        let schedule = schedule.tz(tz)?.catch_up(catch_up.parse()?);
        if misfire_after.is_empty() {
            return Ok(schedule);
        }
        let ms = misfire_after.parse().map_err(|_| Error::InvalidSchedule {
            field: "misfire_after".into(),
            reason: format!("stored threshold {misfire_after:?} is not a number of ms"),
        })?;
        schedule.misfire_after(Duration::from_millis(ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_back_as_written() {
        assert_eq!(
            Schedule::every(Duration::from_secs(300)).unwrap().spec(),
            "every 5m"
        );
        assert_eq!(format_ms(5_400_250), "1h30m250ms");
        let s = Schedule::cron(" 0 9 * * MON-FRI ").unwrap();
        let (kind, spec) = s.stored();
        let back = Schedule::from_stored(kind, &spec, "Europe/Berlin", "all", "1500").unwrap();
        assert_eq!(
            (back.spec(), back.zone(), back.catch_up),
            ("0 9 * * MON-FRI".to_string(), "Europe/Berlin", CatchUp::All)
        );
        assert_eq!(back.misfire_threshold(), Duration::from_millis(1_500));
        let old = Schedule::from_stored(kind, &spec, "UTC", "last", "").unwrap();
        assert_eq!(old.misfire_threshold(), DEFAULT_MISFIRE_AFTER);
    }

    #[test]
    fn bad_input_is_refused_naming_what() {
        let err = Schedule::every(Duration::from_millis(5))
            .unwrap_err()
            .to_string();
        assert!(err.contains("every"), "{err}");
        let err = Schedule::cron("0 9 * * *")
            .unwrap()
            .tz("Mars/Olympus")
            .unwrap_err()
            .to_string();
        assert!(err.contains("tz"), "{err}");
        let err = Schedule::every(Duration::from_secs(1))
            .unwrap()
            .misfire_after(Duration::from_millis(10))
            .unwrap_err()
            .to_string();
        assert!(err.contains("misfire_after"), "{err}");
        let err = "sometimes".parse::<CatchUp>().unwrap_err().to_string();
        assert!(err.contains("catch_up"), "{err}");
    }
}
