//! What commands print: one [`Outcome`] per command (text or JSON), and one line per event
//! for the long-running ones.
//!
//! Text output is for a terminal, and values from etcd are written by anyone with write
//! access there: every value is wrapped in [`Shown`] where a line is built (so a planted
//! newline cannot forge a line), and every text that is printed passes [`terminal_safe`]
//! (so nothing a terminal acts on, an escape sequence, OSC 52, a bidi override, reaches it
//! even from a line that forgot [`Shown`]). JSON output is exact.

use std::io::Write;

use serde_json::Value;

pub use dw_ctl_plan::shown::{Shown, escape, is_unsafe_char, line_safe, terminal_safe};

/// `--output`: how a command prints its outcome and events (its command-line values:
/// `cli/output_format.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Lines for people.
    Text,
    /// One JSON document (long-running commands: one JSON object per line).
    Json,
}

/// A finished command's result, in both forms; `--output` picks one.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// What `--output text` prints (nothing when empty).
    pub text: String,
    /// What `--output json` prints.
    pub json: Value,
}

impl Outcome {
    /// Prints the outcome on stdout in `format`.
    pub fn print(&self, format: OutputFormat) {
        let mut stdout = std::io::stdout().lock();
        let _ = match format {
            OutputFormat::Text if self.text.is_empty() => Ok(()),
            OutputFormat::Text => writeln!(stdout, "{}", terminal_safe(self.text.trim_end())),
            OutputFormat::Json => writeln!(stdout, "{}", self.json),
        };
    }
}

/// Prints the events of a long-running command, one line each, flushed at once (so that
/// journald and pipes see them as they happen).
#[derive(Debug, Clone, Copy)]
pub struct Reporter {
    /// Text lines or JSON objects.
    pub format: OutputFormat,
}

impl Reporter {
    /// Prints one event: `event: text`, or `fields` with `event` and `at` added.
    pub fn event(&self, event: &str, text: &str, mut fields: Value) {
        let line = match self.format {
            // One event, one line, whatever a value in it held.
            OutputFormat::Text => line_safe(&format!("{event}: {text}")),
            OutputFormat::Json => {
                if let Value::Object(object) = &mut fields {
                    object.insert("event".into(), Value::from(event));
                    object.insert("at".into(), Value::from(crate::plan::clock::now_rfc3339()));
                }
                fields.to_string()
            }
        };
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }
}

/// The text of a listing: its lines, or `empty` when there are none.
pub fn listing_text(lines: impl IntoIterator<Item = String>, empty: &str) -> String {
    let lines: Vec<String> = lines.into_iter().collect();
    if lines.is_empty() {
        empty.to_string()
    } else {
        lines.join("\n")
    }
}
