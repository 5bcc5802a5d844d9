//! The audit sink: one line on stdout for each write done or refused (board.rs, refusals.rs).

use std::io::Write;

/// Writes `audit: <when> <text>` on stdout, `text` already escaped.
pub(super) fn line(text: &str) {
    let when = jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now());
    // Not println!: a closed stdout (piped into a pager that quit) must not stop the write.
    let _ = writeln!(std::io::stdout().lock(), "audit: {when} {text}");
}
