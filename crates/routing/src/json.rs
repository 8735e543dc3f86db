//! JSON decoding that accepts and rejects what PHP's `json_decode()` does, for the value
//! shapes this crate reads.
//!
//! serde_json and PHP agree on the grammar, but not on two limits: PHP (default depth 512)
//! accepts arrays and objects nested up to 511 deep where serde_json stops at 128, and PHP
//! reads `-0` as the integer 0 where serde_json gives the float -0.0. The first is handled
//! here, the second by [`last_member_text`], which recovers a number's exact text.

use serde::Deserializer as _;
use serde::de::{Deserialize, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// The deepest nesting PHP's `json_decode()` accepts with its default depth of 512 (it
/// counts the scalar inside the innermost array as one more level).
pub(crate) const MAX_NESTING: usize = 511;

/// Decodes one JSON document, or says why it is not one (as PHP would see it).
pub(crate) fn decode(bytes: &[u8]) -> Result<Value, String> {
    check_nesting(bytes)?;
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    // Safe to lift: check_nesting bounded the depth the parser can reach.
    deserializer.disable_recursion_limit();
    let value = Value::deserialize(&mut deserializer).map_err(|e| format!("not JSON: {e}"))?;
    deserializer.end().map_err(|e| format!("not JSON: {e}"))?;
    Ok(value)
}

/// Refuses documents nested deeper than PHP accepts, before the recursive parser sees them.
///
/// It counts brackets outside strings. On a document that is invalid anyway it may count
/// differently from the parser, but only after the point where the parser stops, so the
/// parser never nests deeper than this allows.
fn check_nesting(bytes: &[u8]) -> Result<(), String> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(format!("not JSON: nested deeper than {MAX_NESTING}"));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// The exact source text of the value of the last member called `name` in the JSON object
/// `object` (the last, as duplicate keys resolve to the last value). None when `object` is
/// not an object or has no such member.
pub(crate) fn last_member_text<'a>(object: &'a [u8], name: &str) -> Option<&'a str> {
    check_nesting(object).ok()?;
    let mut deserializer = serde_json::Deserializer::from_slice(object);
    deserializer.disable_recursion_limit();
    let raw = (&mut deserializer)
        .deserialize_map(LastMember { name })
        .ok()??;
    Some(raw.get())
}

struct LastMember<'n> {
    name: &'n str,
}

impl<'de> Visitor<'de> for LastMember<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            let raw: &'de RawValue = map.next_value()?;
            if key == self.name {
                found = Some(raw);
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn accepts_the_nesting_php_accepts() {
        // PHP 8.4: json_decode() of 511 nested arrays succeeds, of 512 fails.
        assert!(decode(nested(511).as_bytes()).is_ok());
        assert!(decode(nested(512).as_bytes()).is_err());
        assert!(decode(format!("{}1", "[".repeat(100_000)).as_bytes()).is_err());
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let text = format!("{{\"a\":\"{}\\\"{}\"}}", "[".repeat(600), "{".repeat(600));
        assert!(decode(text.as_bytes()).is_ok());
    }

    #[test]
    fn rejects_what_is_not_one_json_document() {
        for bad in [
            &b""[..],
            b"{",
            b"{} {}",
            b"{\"a\":1,}",
            b"\"\\ud800\"",
            b"\xff",
            b"nul",
        ] {
            assert!(
                decode(bad).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn finds_the_exact_text_of_the_last_member() {
        let object = br#"{"a": -0, "b": {"c": 1}, "a" : -0.0 }"#;
        assert_eq!(last_member_text(object, "a"), Some("-0.0"));
        assert_eq!(last_member_text(object, "b"), Some(r#"{"c": 1}"#));
        assert_eq!(last_member_text(object, "z"), None);
        assert_eq!(last_member_text(b"[1]", "a"), None);
    }
}
