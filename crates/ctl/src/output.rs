//! What commands print: one [`Outcome`] per command (text or JSON), and one line per event
//! for the long-running ones.
//!
//! Text output is for a terminal, and values from etcd are written by anyone with write
//! access there: every value is wrapped in [`Shown`] where a line is built (so a planted
//! newline cannot forge a line), and every text that is printed passes [`terminal_safe`]
//! (so nothing a terminal acts on, an escape sequence, OSC 52, a bidi override, reaches it
//! even from a line that forgot [`Shown`]). JSON output is exact.

use std::fmt;
use std::io::Write;

use clap::ValueEnum;
use serde_json::Value;

/// `--output`: how a command prints its outcome and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
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
                    object.insert("at".into(), Value::from(crate::clock::now_rfc3339()));
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

/// Text from etcd (or any other party) made safe for a terminal: control characters
/// (C0, DEL, C1), bidirectional overrides and isolates (U+202A..U+202E, U+2066..U+2069,
/// U+200E, U+200F, U+061C) and line/paragraph separators are shown as `\u{1b}`-style
/// escapes; everything else, a backslash included (raw JSON stays readable), as is.
/// Wrap every value that did not come from dwctl itself in it when building a
/// human-readable line: `format!("node {}", Shown(&node.id))`. `--output json` never uses
/// it: JSON stays exact.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a>(pub &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_escaped(f, self.0, Mode::Value)
    }
}

/// The escaped form of `text`, as [`Shown`] displays it.
pub fn escape(text: &str) -> String {
    Shown(text).to_string()
}

/// Whether a terminal could act on `c` (or reorder what follows it) instead of showing it.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// What [`write_escaped`] escapes besides the unsafe characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One value ([`Shown`]): newlines too.
    Value,
    /// A line dwctl built from values already shown: newlines too (one event, one line).
    Line,
    /// A whole output dwctl built: `\n` passes.
    Text,
}

/// Writes `text` with every unsafe character escaped, and what `mode` adds.
fn write_escaped(out: &mut impl fmt::Write, text: &str, mode: Mode) -> fmt::Result {
    for c in text.chars() {
        match c {
            '\n' if mode == Mode::Text => out.write_char('\n')?,
            c if is_unsafe_char(c) => write!(out, "\\u{{{:x}}}", u32::from(c))?,
            c => out.write_char(c)?,
        }
    }
    Ok(())
}

/// The last line of defence: a whole text output with any unsafe character that slipped
/// past [`Shown`] escaped (newlines kept). Every text that reaches
/// stdout or stderr passes here.
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let _ = write_escaped(&mut out, text, Mode::Text);
    out
}

/// [`terminal_safe`] for one line: a newline is escaped too, so that the line stays one
/// line whatever a value in it held (the events of the long-running commands).
pub fn line_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let _ = write_escaped(&mut out, text, Mode::Line);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(
            escape("a\u{1b}]52;c;x\u{7}b\nc\u{202e}d\u{9b}é\\"),
            "a\\u{1b}]52;c;x\\u{7}b\\u{a}c\\u{202e}d\\u{9b}é\\"
        );
        assert_eq!(format!("[{}]", Shown("fra-a")), "[fra-a]");
        // The last filter keeps dwctl's own newlines only.
        assert_eq!(terminal_safe("one\ntwo\u{1b}[8m"), "one\ntwo\\u{1b}[8m");
        for c in [
            '\u{2066}', '\u{2069}', '\u{200f}', '\u{61c}', '\u{2028}', '\u{7f}',
        ] {
            assert!(is_unsafe_char(c), "{c:?}");
        }
        assert!(!is_unsafe_char('€') && !is_unsafe_char(' '));
    }

    #[test]
    fn an_event_line_stays_one_line() {
        assert_eq!(
            line_safe("up: x\u{1b}[8m\nFORGED: y registered\r\u{2028}"),
            "up: x\\u{1b}[8m\\u{a}FORGED: y registered\\u{d}\\u{2028}"
        );
    }
}
