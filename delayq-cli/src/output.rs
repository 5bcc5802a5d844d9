//! Writing on stdout without `println!`, which panics (exit 101) when stdout cannot be
//! written: a full disk (`> /dev/full`), a closed pipe. A failed write is a `Failure` (exit 1,
//! its message on stderr).

use std::io::Write;

use crate::failure::Failure;

/// Writes `text` and a line break on stdout, flushed.
pub(crate) fn line(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|e| Failure::Failed(format!("cannot write to stdout: {e}")))
}
