//! One option the file sets, checked, with its line.

use super::scope::Scope;
use crate::config::options::Parsed;

/// One option set in the file.
#[derive(Debug, Clone)]
pub struct FileSetting {
    /// What it applies to.
    pub scope: Scope,
    /// The option (one `scope`'s kind takes).
    pub option: &'static str,
    /// The checked value.
    pub value: Parsed,
    /// Its line (1-based).
    pub line: usize,
}
