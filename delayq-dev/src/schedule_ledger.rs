//! The ledger of a `#[scheduled]` fn in a test process: one line per tick run.

use std::path::Path;

/// One run of a tick, as a process records it: `<scheduled_ms> <missed> <attempt> <ran_ms>
/// <pid>`, times in milliseconds since the epoch by the (shared) machine clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleTick {
    /// The tick's nominal time.
    pub scheduled_ms: u64,
    /// Ticks the catch-up policy skipped right before it.
    pub missed: u64,
    /// Which run of the tick.
    pub attempt: u32,
    /// When the handler ran.
    pub ran_ms: u64,
    /// The process.
    pub pid: u32,
}

impl ScheduleTick {
    /// The line as written.
    pub fn format(&self) -> String {
        format!(
            "{} {} {} {} {}\n",
            self.scheduled_ms, self.missed, self.attempt, self.ran_ms, self.pid
        )
    }

    /// Every complete line of a ledger (a last line without its newline is not read yet);
    /// panics on a torn line before it.
    pub fn read_all(path: &Path) -> Vec<ScheduleTick> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete
            .lines()
            .map(|l| {
                let f: Vec<u64> = l.split(' ').filter_map(|x| x.parse().ok()).collect();
                match f[..] {
                    [scheduled_ms, missed, attempt, ran_ms, pid] => ScheduleTick {
                        scheduled_ms,
                        missed,
                        attempt: attempt as u32,
                        ran_ms,
                        pid: pid as u32,
                    },
                    _ => panic!("torn schedule ledger line {l:?}"),
                }
            })
            .collect()
    }
}
