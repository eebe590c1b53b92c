//! Progress on standard error while a benchmark runs: one line, rewritten
//! in place (`\r`), saying what is being measured and how far
//! (`semop: round 3/5 [#########...........] 45% ipcns, 5 id slots`).
//! Only when standard error is a terminal: piped or redirected (a script,
//! the tests) it says nothing at all, so that what a program reads is the
//! table or the JSON alone. The line is cleared when the benchmark ends
//! (or fails: on drop), before the table is printed.
//!
//! The kernel halves run as children whose standard error is a pipe: they
//! show nothing; their parent says it is waiting for them.

use std::io::{IsTerminal, Write};

/// The bar's width in characters.
const BAR: usize = 20;
/// The longest line written: narrower than an 80-column terminal, so that
/// it never wraps (a wrapped line cannot be rewritten with `\r`).
const WIDTH: usize = 79;

/// A benchmark's progress line (see the module doc).
pub struct Progress {
    bench: &'static str,
    total: usize,
    /// Whether standard error is a terminal: decided once, at creation.
    on: bool,
    /// The length of the line on screen (0: none).
    shown: usize,
}

impl Progress {
    /// Progress of benchmark `bench` through `total` steps, shown only
    /// when standard error is a terminal.
    pub fn new(bench: &'static str, total: usize) -> Progress {
        Progress {
            bench,
            total,
            on: std::io::stderr().is_terminal(),
            shown: 0,
        }
    }

    /// Says that step `done` (counting from 0: the steps before it are
    /// done) of the total is running, and what it is (`round 3/5, ipcns`).
    pub fn step(&mut self, done: usize, what: &str) {
        if !self.on {
            return;
        }
        let l = line(self.bench, done, self.total, what);
        let n = l.chars().count();
        // Spaces over what is left of a longer line before.
        let pad = self.shown.saturating_sub(n);
        let mut err = std::io::stderr().lock();
        // A terminal that cannot be written is no reason to stop measuring.
        let _ = write!(err, "\r{l}{:pad$}", "");
        let _ = err.flush();
        self.shown = n;
    }

    /// Clears the line (before the table is printed).
    pub fn clear(&mut self) {
        if self.on && self.shown > 0 {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{:w$}\r", "", w = self.shown);
            let _ = err.flush();
            self.shown = 0;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

/// `BENCH: [####....] NN% WHAT`, cut to [`WIDTH`] characters.
pub fn line(bench: &str, done: usize, total: usize, what: &str) -> String {
    let total = total.max(1);
    let done = done.min(total);
    let filled = done * BAR / total;
    let l = format!(
        "{bench}: [{}{}] {:>3}% {what}",
        "#".repeat(filled),
        ".".repeat(BAR - filled),
        done * 100 / total
    );
    l.chars().take(WIDTH).collect()
}

/// `round R/N` for round `r` counted from 0.
pub fn round(r: usize, rounds: usize) -> String {
    format!("round {}/{rounds}", r + 1)
}

#[cfg(test)]
mod tests {
    use super::{Progress, line, round};

    #[test]
    fn the_line_says_what_and_how_far() {
        assert_eq!(
            line("semop", 2, 5, &format!("{}, ipcns", round(2, 5))),
            "semop: [########............]  40% round 3/5, ipcns"
        );
        assert_eq!(line("msg", 0, 3, "x"), "msg: [....................]   0% x");
        assert_eq!(line("msg", 3, 3, "x"), "msg: [####################] 100% x");
        // Past the end or no steps: a full bar, no division by zero.
        assert!(line("msg", 9, 3, "x").contains("100%"));
        assert!(line("msg", 0, 0, "x").contains("  0%"));
        let long = line("semget", 1, 2, &"y".repeat(200));
        assert_eq!(long.chars().count(), 79);
    }

    #[test]
    fn nothing_is_shown_when_stderr_is_not_a_terminal() {
        // Under `cargo test` standard error is captured, not a terminal.
        let mut p = Progress::new("semop", 3);
        if !p.on {
            p.step(1, "round 2/3");
            assert_eq!(p.shown, 0);
        }
    }
}
