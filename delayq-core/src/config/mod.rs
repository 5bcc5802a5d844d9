//! External configuration (`delayq.toml` and `DELAYQ_…` variables): the options each kind of
//! component takes and their value types (`options.rs`), reading a file with the line of every
//! value (`file.rs`), variable names (`env.rs`), the nearest valid name for a typo
//! (`suggest.rs`), and the values and where they came from (`value.rs`). Which topics, streams
//! and schedules exist is the runtime's to check: it knows the binary's listeners.

mod env;
mod file;
mod options;
mod suggest;
mod value;

pub use delayq_spec::duration::{format_duration, format_ms};
pub use delayq_spec::{Backoff, Rate};
pub use env::{env_name, runtime_variable_typo, variable_prefix, CONFIG_VAR, NOT_OPTIONS};
pub use file::{ConfigFile, FileSetting, Scope};
pub use options::{option, options, parse, synonym, Kind, Parsed, SecretUrl, ValueKind};
pub use suggest::nearest;
pub use value::{ConfigSource, ConfigValue, Raw};
