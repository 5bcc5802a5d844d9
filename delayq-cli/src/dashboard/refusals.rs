//! Refused writes on the audit sink the done ones use (stdout): who tried what, and why it
//! was refused (another site, unconfirmed, no or a wrong token, a foreign `Host`, read-only).
//! At most [`PER_MINUTE`] such lines a minute, so that a flood of refusals cannot fill a disk
//! or bury the done writes: past it one line says the next are counted, and once the minute
//! is over one line gives their count. A line names the route, never its query (which may
//! hold a secret someone put in a URL) or a token.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Refusal lines written a minute at most.
pub(super) const PER_MINUTE: u32 = 20;
const WINDOW: Duration = Duration::from_secs(60);

/// The rate bound's state (one window at a time).
#[derive(Default)]
pub(super) struct Refusals(Mutex<Window>);

#[derive(Default, Debug, PartialEq)]
struct Window {
    started: Option<Instant>,
    written: u32,
    unwritten: u64,
}

/// What to write for one refusal.
#[derive(Debug, PartialEq)]
struct Note {
    /// How many the last window left unwritten (it ended with this refusal).
    earlier: Option<u64>,
    /// Write this refusal's line.
    write: bool,
    /// This one is the first left unwritten: say so.
    notice: bool,
}

impl Window {
    fn note(&mut self, now: Instant) -> Note {
        let earlier = self.close(now);
        self.started.get_or_insert(now);
        if self.written < PER_MINUTE {
            self.written += 1;
            return Note {
                earlier,
                write: true,
                notice: false,
            };
        }
        self.unwritten += 1;
        Note {
            earlier,
            write: false,
            notice: self.unwritten == 1,
        }
    }

    /// Ends the window once its minute is over: how many it left unwritten, if any.
    fn close(&mut self, now: Instant) -> Option<u64> {
        let over = self
            .started
            .is_some_and(|s| now.saturating_duration_since(s) >= WINDOW);
        if !over {
            return None;
        }
        let unwritten = std::mem::take(self).unwritten;
        (unwritten > 0).then_some(unwritten)
    }
}

impl Refusals {
    /// Audits one refused request: `who` (the remote address), `what` (method and path) and
    /// `why` (the status and the answer's text), within the bound.
    pub(super) fn refused(&self, who: &str, what: &str, why: &str) {
        let note = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .note(Instant::now());
        if let Some(n) = note.earlier {
            unwritten_line(n);
        }
        if note.write {
            super::audit::line(&format!("{who} refused {what}: {why}"));
        }
        if note.notice {
            super::audit::line(&format!(
                "more than {PER_MINUTE} refused writes within a minute: the next are counted, not written, until the minute is over"
            ));
        }
    }

    /// Writes the count of a window that is over (called every few seconds, so that the
    /// count comes when no new refusal does).
    pub(super) fn close_window(&self) {
        let closed = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .close(Instant::now());
        if let Some(n) = closed {
            unwritten_line(n);
        }
    }
}

fn unwritten_line(n: u64) {
    super::audit::line(&format!(
        "{n} more refused write{} in the last minute (not written one by one)",
        if n == 1 { "" } else { "s" }
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twenty_lines_a_minute_then_one_notice_then_the_count() {
        let t0 = Instant::now();
        let mut w = Window::default();
        let mut notes = Vec::new();
        for i in 0..50u64 {
            notes.push(w.note(t0 + Duration::from_millis(i * 100)));
        }
        assert!(notes[..20].iter().all(|n| n.write && !n.notice));
        assert!(!notes[20].write && notes[20].notice);
        assert!(notes[21..].iter().all(|n| !n.write && !n.notice));
        assert!(notes.iter().all(|n| n.earlier.is_none()));
        assert_eq!(
            w.close(t0 + Duration::from_secs(59)),
            None,
            "the minute is not over"
        );
        // The next refusal after the minute brings the count of the last one, and is written.
        let next = w.note(t0 + WINDOW);
        assert_eq!(
            next,
            Note {
                earlier: Some(30),
                write: true,
                notice: false
            }
        );
        // A window that is over with nothing unwritten says nothing; a closed one is reset.
        assert_eq!(w.close(t0 + WINDOW * 3), None);
        assert_eq!(w, Window::default());
        for i in 0..21 {
            w.note(t0 + WINDOW * 3 + Duration::from_secs(i));
        }
        assert_eq!(w.close(t0 + WINDOW * 5), Some(1));
        assert_eq!(w.close(t0 + WINDOW * 6), None);
    }
}
