//! Values from etcd shown on a terminal: [`Shown`] escapes one value where a line is built,
//! [`terminal_safe`] and [`line_safe`] filter whole outputs. Pure text functions, here so
//! that the planners' messages escape what they quote; dwctl's `output` prints.

use std::fmt;

/// Text from etcd (or any other party) made safe for a terminal: control characters
/// (C0, DEL, C1), bidirectional overrides and isolates (U+202A..U+202E, U+2066..U+2069,
/// U+200E, U+200F, U+061C) and line/paragraph separators are shown as `\u{1b}`-style
/// escapes, and a backslash that would otherwise read as the start of an escape (one
/// followed by `u{`, by another backslash or by an escaped character) is doubled; every
/// other character, a lone backslash included (raw JSON such as `"a\"b"` or `\u00e9` stays
/// readable), as is. So `\u{1b}` on the screen is always an escaped character (the text
/// `\u{1b}` in a value is shown `\\u{1b}`), `\\` is always one backslash, and a shown value
/// decodes to exactly the value stored.
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
    /// One value ([`Shown`]): newlines too, and a backslash that would read as an escape.
    Value,
    /// A line dwctl built from values already shown: newlines too (one event, one line);
    /// backslashes pass (they may be the values' escapes).
    Line,
    /// A whole output dwctl built: `\n` passes, backslashes too.
    Text,
}

/// Writes `text` with every unsafe character escaped, and what `mode` adds.
fn write_escaped(out: &mut impl fmt::Write, text: &str, mode: Mode) -> fmt::Result {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\n' if mode == Mode::Text => out.write_char('\n')?,
            '\\' if mode == Mode::Value && starts_an_escape(chars.clone()) => {
                out.write_str("\\\\")?
            }
            c if is_unsafe_char(c) => write!(out, "\\u{{{:x}}}", u32::from(c))?,
            c => out.write_char(c)?,
        }
    }
    Ok(())
}

/// Whether what follows a backslash (`rest`, as [`Shown`] would write it) begins with `\`
/// or `u{`, so that the backslash written as is would read as part of an escape.
fn starts_an_escape(mut rest: impl Iterator<Item = char>) -> bool {
    match rest.next() {
        Some('\\') => true,
        Some(c) if is_unsafe_char(c) => true,
        Some('u') => rest.next() == Some('{'),
        _ => false,
    }
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

    /// The reading of a shown value: `\\` is a backslash, `\u{..}` the character, any other
    /// backslash itself.
    fn unescape(shown: &str) -> String {
        let mut out = String::new();
        let mut rest = shown;
        while let Some(c) = rest.chars().next() {
            if let Some(after) = rest.strip_prefix("\\\\") {
                out.push('\\');
                rest = after;
            } else if let Some(after) = rest.strip_prefix("\\u{")
                && let Some((hex, after)) = after.split_once('}')
                && let Some(c) = u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)
            {
                out.push(c);
                rest = after;
            } else {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        out
    }

    #[test]
    fn a_backslash_is_doubled_only_where_it_would_read_as_an_escape() {
        // Raw JSON stays readable: its escapes are not dwctl's.
        assert_eq!(escape(r#"{"a":"x\"y\u00e9\n"}"#), r#"{"a":"x\"y\u00e9\n"}"#);
        // The text of an escape, in a value, is not shown as one.
        assert_eq!(escape("\\u{1b}[2J"), "\\\\u{1b}[2J");
        assert_eq!(escape("\u{1b}[2J"), "\\u{1b}[2J");
        assert_ne!(escape("\\u{1b}"), escape("\u{1b}"));
        assert_eq!(escape("a\\\\b"), "a\\\\\\b");
        assert_eq!(escape("a\\\u{1b}"), "a\\\\\\u{1b}");
        assert_eq!(escape("trailing\\"), "trailing\\");
        // Every value reads back as exactly itself.
        for value in [
            "\\u{1b}",
            "\u{1b}",
            "\\\u{1b}",
            "\\\\u{1b}",
            "\\\\",
            "\\",
            "\\u{",
            "\\u",
            "u{1b}",
            "\\\n",
            "x\\u{zz}",
            "\\\u{202e}\\",
            r#"{"k":"\\\"\\u{7}"}"#,
            "é\\u{e9}",
        ] {
            assert_eq!(
                unescape(&escape(value)),
                value,
                "{value:?} shown {}",
                escape(value)
            );
        }
    }

    #[test]
    fn an_event_line_stays_one_line() {
        assert_eq!(
            line_safe("up: x\u{1b}[8m\nFORGED: y registered\r\u{2028}"),
            "up: x\\u{1b}[8m\\u{a}FORGED: y registered\\u{d}\\u{2028}"
        );
    }
}
