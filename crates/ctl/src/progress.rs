//! Progress for whoever watches: [`CommitNote`], what a one-shot command has already
//! written (for whoever stops it), and [`ProgressLine`], a status line rewritten in place on
//! a terminal (`--wait`'s node count, `rollout`'s step and bake).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// The revision a command's write committed at, once it has (shared with the signal
/// handler of `main_with`, which then says the write is in instead of "nothing was sent").
#[derive(Debug, Clone, Default)]
pub struct CommitNote(Arc<AtomicI64>);

impl CommitNote {
    /// Notes that the write committed at `revision` (a positive etcd revision).
    pub fn set(&self, revision: i64) {
        self.0.store(revision.max(1), Ordering::SeqCst);
    }

    /// The revision noted, if the write committed.
    pub fn committed(&self) -> Option<i64> {
        let revision = self.0.load(Ordering::SeqCst);
        (revision > 0).then_some(revision)
    }
}

/// One line on stderr, rewritten in place; only where stderr is a terminal and the output
/// is text (a pipe or `--output json` gets no progress line, only events).
#[derive(Debug, Default)]
pub struct ProgressLine {
    width: usize,
}

impl ProgressLine {
    /// A progress line, when `format` is text and stderr is a terminal.
    pub fn on_terminal(format: crate::output::OutputFormat) -> Option<ProgressLine> {
        use std::io::IsTerminal;
        (format == crate::output::OutputFormat::Text && std::io::stderr().is_terminal())
            .then(ProgressLine::default)
    }

    /// Replaces the line with `text` (made terminal-safe).
    pub fn show(&mut self, text: &str) {
        use std::io::Write;
        let text = crate::output::terminal_safe(text).replace('\n', " ");
        let width = text.chars().count();
        let pad = self.width.saturating_sub(width);
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r{text}{:pad$}", "");
        let _ = stderr.flush();
        self.width = width;
    }

    /// Blanks the line, so that an event printed next starts on a clean line.
    pub fn clear(&mut self) {
        use std::io::Write;
        if self.width > 0 {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r{:width$}\r", "", width = self.width);
            let _ = stderr.flush();
            self.width = 0;
        }
    }
}
