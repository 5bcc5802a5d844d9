//! The rules delayq's attributes and its runtime both check, written once.
//!
//! `delayq-macros` checks `#[delay_listener(ack_timeout = "30s")]` at compile time and
//! `delayq-core` checks `delayq.toml`, `DELAYQ_*` variables, builder calls and
//! `upsert_schedule` at run time, with these same functions, so a value one accepts the other
//! accepts, and a duration either prints can be pasted back where a duration is read.
//!
//! - [`options`]: what each kind of component takes, with [`defaults`] and limits;
//! - [`duration`]: humane durations (`30s`, `1h30m250ms`) and the one formatter;
//! - [`Backoff`]: retry delay policies (`exp(1s, 10m)`, `fixed(5s)`);
//! - [`Rate`]: rate limits (`100/s`, `5/m`, `1/h`);
//! - [`cron()`] and [`time_zone`]: schedule patterns and IANA zones;
//! - [`name_problem`], [`namespace_ok`]: the rule for names that become part of Redis keys.
//!
//! Every check fails with a [`SpecError`] naming the field at fault and why; the macros turn it
//! into a compile error on the offending span, the runtime into `delayq_core::Error`.

#![deny(missing_docs)]

mod backoff;
mod cron;
pub mod defaults;
pub mod duration;
mod error;
mod flow;
mod name;
pub mod options;
mod rate;

pub use backoff::{Backoff, FORMAT as BACKOFF_FORMAT};
pub use cron::{cron, time_zone, CRON_FIELDS_5, CRON_FIELDS_6};
pub use error::SpecError;
pub use flow::Flow;
pub use name::{name_problem, namespace_ok, MAX_NAMESPACE_LEN, MAX_NAME_LEN, NAME_RULE};
pub use rate::{Rate, FORMAT as RATE_FORMAT, MAX_PER_PERIOD};
