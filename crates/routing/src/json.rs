//! JSON read the way PHP's `json_decode()` reads it, for the values this crate interprets.
//!
//! The userland twin decodes with PHP, and the two must agree on which values are valid.
//! serde_json and PHP share the grammar but not the edges: PHP accepts nesting up to 511
//! (serde_json stops at 128), reads `1e400` as INF (serde_json refuses it), reads `-0` as the
//! integer 0 (serde_json: the float -0.0), and keeps a duplicated key at its first position
//! with its last value. So a document is first checked by [`validate`], a strict syntax check
//! with PHP's limits, and then read member by member from its exact source text
//! ([`RawValue`]), with the few conversions the callers need written out here.

use serde::de::{Deserializer as _, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The deepest nesting of arrays and objects PHP's `json_decode()` accepts at its default
/// depth of 512 (PHP 8.4: 511 nested arrays decode, 512 do not).
pub(crate) const MAX_NESTING: usize = 511;

/// True when `bytes` may hold a `\uD800`-`\uDFFF` escape: serde_json and PHP may
/// disagree on a lone surrogate, so such input takes the exact reading.
pub(crate) fn may_hold_surrogate_escape(bytes: &[u8]) -> bool {
    bytes.contains(&b'\\')
        && bytes.windows(3).any(|w| {
            w[0] == b'u' && matches!(w[1], b'd' | b'D') && b"89abcdefABCDEF".contains(&w[2])
        })
}

/// True when `bytes` starts (after whitespace) with `{`: serde's derived structs also
/// accept an array of the fields in order, which PHP would not read as an object.
pub(crate) fn starts_with_object(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        == Some(&b'{')
}

/// True when arrays and objects in `bytes` nest at most `limit` deep (strings skipped).
/// serde_json skips ignored members without a depth limit, so the common-case readers
/// check depth themselves.
pub(crate) fn nests_at_most(bytes: &[u8], limit: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
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
                if depth > limit {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    true
}

/// Checks that `bytes` is one JSON document PHP would decode, and returns it as text.
pub(crate) fn validate(bytes: &[u8]) -> Result<&str, String> {
    // Outside strings any non-ASCII byte is a syntax error anyway, and inside strings PHP
    // wants well-formed UTF-8: checking the whole input is the same rule.
    let text = std::str::from_utf8(bytes)
        .map_err(|e| format!("not JSON: invalid UTF-8 at byte {}", e.valid_up_to()))?;
    Syntax { bytes, pos: 0 }.document()?;
    Ok(text)
}

/// The end (one past the closing quote) of the JSON string literal whose opening quote is
/// at `start`, checked by PHP's rules (escapes, control characters, surrogate pairs);
/// `None` when it is not one.
pub(crate) fn string_literal_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut syntax = Syntax { bytes, pos: start };
    syntax.string().ok()?;
    Some(syntax.pos)
}

/// A strict, iterative JSON syntax check (RFC 8259, as PHP's scanner applies it).
struct Syntax<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Syntax<'_> {
    fn document(&mut self) -> Result<(), String> {
        // The open containers, innermost last: b'[' or b'{'.
        let mut open: Vec<u8> = Vec::new();
        'value: loop {
            self.skip_whitespace();
            match self.peek() {
                Some(open_byte @ (b'[' | b'{')) => {
                    if open.len() == MAX_NESTING {
                        return Err(format!("not JSON: nested deeper than {MAX_NESTING}"));
                    }
                    self.pos += 1;
                    open.push(open_byte);
                    self.skip_whitespace();
                    let close = if open_byte == b'[' { b']' } else { b'}' };
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        open.pop();
                    } else if open_byte == b'{' {
                        self.member_name()?;
                        continue 'value;
                    } else {
                        continue 'value;
                    }
                }
                Some(b'"') => self.string()?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                _ => return Err(self.error("expected a value")),
            }
            // A value is complete: close containers until one wants another value.
            loop {
                self.skip_whitespace();
                let Some(&container) = open.last() else {
                    return match self.peek() {
                        None => Ok(()),
                        Some(_) => Err(self.error("trailing characters")),
                    };
                };
                let close = if container == b'[' { b']' } else { b'}' };
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        if container == b'{' {
                            self.skip_whitespace();
                            self.member_name()?;
                        }
                        continue 'value;
                    }
                    Some(byte) if byte == close => {
                        self.pos += 1;
                        open.pop();
                    }
                    _ => return Err(self.error("expected `,` or a closing bracket")),
                }
            }
        }
    }

    /// `"name" :`, leaving the position before the member's value.
    fn member_name(&mut self) -> Result<(), String> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a member name"));
        }
        self.string()?;
        self.skip_whitespace();
        if self.peek() != Some(b':') {
            return Err(self.error("expected `:`"));
        }
        self.pos += 1;
        Ok(())
    }

    fn string(&mut self) -> Result<(), String> {
        self.pos += 1; // the opening quote
        loop {
            let Some(byte) = self.next() else {
                return Err(self.error("unterminated string"));
            };
            match byte {
                b'"' => return Ok(()),
                b'\\' => match self.next() {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {}
                    Some(b'u') => {
                        let unit = self.hex4()?;
                        if (0xDC00..0xE000).contains(&unit) {
                            return Err(self.error("unpaired UTF-16 surrogate"));
                        }
                        if (0xD800..0xDC00).contains(&unit) {
                            // PHP wants the low half right after the high one.
                            if self.next() != Some(b'\\') || self.next() != Some(b'u') {
                                return Err(self.error("unpaired UTF-16 surrogate"));
                            }
                            if !(0xDC00..0xE000).contains(&self.hex4()?) {
                                return Err(self.error("unpaired UTF-16 surrogate"));
                            }
                        }
                    }
                    _ => return Err(self.error("invalid escape")),
                },
                0x00..=0x1F => return Err(self.error("control character in a string")),
                _ => {}
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let mut unit = 0;
        for _ in 0..4 {
            let digit = self
                .next()
                .and_then(|byte| char::from(byte).to_digit(16))
                .ok_or_else(|| self.error("invalid \\u escape"))?;
            unit = unit * 16 + digit;
        }
        Ok(unit)
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; what follows is the caller's check.
    fn number(&mut self) -> Result<(), String> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.next() {
            Some(b'0') => {}
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error("invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.required_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.required_digits()?;
        }
        Ok(())
    }

    fn required_digits(&mut self) -> Result<(), String> {
        match self.peek() {
            Some(b'0'..=b'9') => {
                self.digits();
                Ok(())
            }
            _ => Err(self.error("invalid number")),
        }
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), String> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.error("invalid literal"))
        }
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }

    fn error(&self, what: &str) -> String {
        format!("not JSON: {what} at byte {}", self.pos)
    }
}

/// What a JSON value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    /// The kind of the (valid) JSON text `text`, from its first significant byte.
    pub(crate) fn of(text: &str) -> Kind {
        match text
            .trim_start_matches([' ', '\t', '\n', '\r'])
            .as_bytes()
            .first()
        {
            Some(b'n') => Kind::Null,
            Some(b't' | b'f') => Kind::Bool,
            Some(b'"') => Kind::String,
            Some(b'[') => Kind::Array,
            Some(b'{') => Kind::Object,
            _ => Kind::Number,
        }
    }

    /// For error messages: "is {described}".
    pub(crate) fn described(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Array => "an array",
            Kind::Object => "an object",
        }
    }
}

/// The members of the object `text` (valid JSON), as PHP orders them: a duplicated name
/// keeps its first position and takes its last value. None when `text` is not an object.
pub(crate) fn object_members(text: &str) -> Option<Vec<(String, &RawValue)>> {
    if Kind::of(text) != Kind::Object {
        return None;
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let members = (&mut deserializer).deserialize_map(Members).ok()?;
    if members.len() < 2 {
        return Some(members);
    }
    let mut position: rustc_hash::FxHashMap<String, usize> = rustc_hash::FxHashMap::default();
    let mut unique: Vec<(String, &RawValue)> = Vec::with_capacity(members.len());
    for (name, value) in members {
        match position.get(&name) {
            Some(&index) => unique[index].1 = value,
            None => {
                position.insert(name.clone(), unique.len());
                unique.push((name, value));
            }
        }
    }
    Some(unique)
}

/// The value of member `name`, PHP's way (the last one written).
pub(crate) fn member<'a>(members: &[(String, &'a RawValue)], name: &str) -> Option<&'a RawValue> {
    members
        .iter()
        .find(|(member, _)| member == name)
        .map(|&(_, value)| value)
}

/// The elements of the array `text` (valid JSON). None when `text` is not an array.
pub(crate) fn array_elements(text: &str) -> Option<Vec<&RawValue>> {
    if Kind::of(text) != Kind::Array {
        return None;
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    (&mut deserializer).deserialize_seq(Elements).ok()
}

/// The string `text` (valid JSON) decodes to. None when it is not a string.
pub(crate) fn string(text: &str) -> Option<String> {
    if Kind::of(text) != Kind::String {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// The integer `text` (valid JSON) is to PHP: integer syntax (no fraction, no exponent;
/// `-0` included) within i64. A larger integer is a float to PHP, so None.
pub(crate) fn integer(text: &str) -> Option<i64> {
    let text = text.trim_matches([' ', '\t', '\n', '\r']);
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `text` (valid JSON) as a serde_json value. A number beyond the double range (PHP: INF)
/// has no serde_json form and becomes null.
pub(crate) fn to_value(text: &str) -> Value {
    match Kind::of(text) {
        Kind::Object => {
            let members = object_members(text).unwrap_or_default();
            let mut object = Map::with_capacity(members.len());
            for (name, member) in members {
                object.insert(name, to_value(member.get()));
            }
            Value::Object(object)
        }
        Kind::Array => Value::Array(
            array_elements(text)
                .unwrap_or_default()
                .into_iter()
                .map(|element| to_value(element.get()))
                .collect(),
        ),
        Kind::Number => number_value(text),
        // null, booleans and strings read the same in serde_json and PHP.
        _ => serde_json::from_str(text).unwrap_or(Value::Null),
    }
}

/// A number as PHP reads it: an integer literal within i64 is an int (`-0` included),
/// anything else a double (integers beyond i64 too). PHP's ±INF for `1e400` has no
/// serde_json form: it becomes null.
fn number_value(text: &str) -> Value {
    match integer(text) {
        Some(integer) => Value::from(integer),
        None => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
    }
}

/// Collects an object's members as raw text, in document order, duplicates included.
struct Members;

impl<'de> Visitor<'de> for Members {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(name) = map.next_key::<String>()? {
            let value: &'de RawValue = map.next_value()?;
            members.push((name, value));
        }
        Ok(members)
    }
}

/// Collects an array's elements as raw text.
struct Elements;

impl<'de> Visitor<'de> for Elements {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut elements = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(element) = seq.next_element::<&'de RawValue>()? {
            elements.push(element);
        }
        Ok(elements)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn accepts_the_nesting_php_accepts() {
        // PHP 8.4: json_decode() of 511 nested arrays (or objects) succeeds, of 512 fails.
        assert!(validate(nested(511).as_bytes()).is_ok());
        assert!(validate(nested(512).as_bytes()).is_err());
        let objects = format!("{}1{}", r#"{"a":"#.repeat(511), "}".repeat(511));
        assert!(validate(objects.as_bytes()).is_ok());
        let objects = format!("{}1{}", r#"{"a":"#.repeat(512), "}".repeat(512));
        assert!(validate(objects.as_bytes()).is_err());
        assert!(validate("[".repeat(1_000_000).as_bytes()).is_err());
    }

    #[test]
    fn accepts_what_php_accepts() {
        for good in [
            "1",
            " -0 ",
            "1.5E+3",
            "-12.5e-3",
            "1e400",
            "\"\\ud800\\udc00 \\u00e9 \\/ \\b\\f\\n\\r\\t \u{7f} é\"",
            "{}",
            "[]",
            "{\"a\":[1,{\"b\":null}],\"a\":true, \"\":false}",
            "[\"[{\", \"\\\"]\"]",
        ] {
            assert!(validate(good.as_bytes()).is_ok(), "refused {good:?}");
        }
    }

    #[test]
    fn refuses_what_php_refuses() {
        for bad in [
            &b""[..],
            b" ",
            b"{",
            b"{} {}",
            b"{\"a\":1,}",
            b"[1,]",
            b"[,1]",
            b"{\"a\" 1}",
            b"{1:1}",
            b"01",
            b"1.",
            b".5",
            b"1e",
            b"+1",
            b"-",
            b"NaN",
            b"nul",
            b"True",
            b"\"\\ud800\"",
            b"\"\\udc00\"",
            b"\"\\ud800\\u0041\"",
            b"\"\\x\"",
            b"\"\\u12\"",
            b"\"a\tb\"",
            b"\"\xff\"",
            b"\xef\xbb\xbf1",
            b"'a'",
        ] {
            assert!(
                validate(bad).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn reads_members_as_php_orders_them() {
        let members = object_members(r#"{"b": 1, "a": [2], "b" : -0.0 }"#).unwrap();
        let names: Vec<&str> = members.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(member(&members, "b").map(RawValue::get), Some("-0.0"));
        assert_eq!(member(&members, "a").map(RawValue::get), Some("[2]"));
        assert!(member(&members, "z").is_none());
        assert!(object_members("[1]").is_none());
    }

    #[test]
    fn reads_integers_as_php_does() {
        assert_eq!(integer("0"), Some(0));
        assert_eq!(integer("-0"), Some(0));
        assert_eq!(integer("-5"), Some(-5));
        assert_eq!(integer("1000000"), Some(1_000_000));
        assert_eq!(integer("9223372036854775807"), Some(i64::MAX));
        for not_an_integer in ["9223372036854775808", "1.0", "1e2", "\"1\"", "true", "-"] {
            assert_eq!(integer(not_an_integer), None, "{not_an_integer}");
        }
    }

    #[test]
    fn converts_to_values_keeping_order_and_php_edges() {
        let value = to_value(r#"{"z":1,"a":[true,"x",1e400],"z":2}"#);
        assert_eq!(value.to_string(), r#"{"z":2,"a":[true,"x",null]}"#);
        // PHP 8.4 json_decode(): -0 is int(0), -0.0 float(-0), 9223372036854775808 a float,
        // -9223372036854775808 an int, 1E3 float(1000).
        assert_eq!(to_value("-0"), Value::from(0i64));
        assert!(to_value("-0").is_i64());
        let negative_zero = to_value("-0.0").as_f64().unwrap();
        assert!(negative_zero == 0.0 && negative_zero.is_sign_negative());
        assert_eq!(
            to_value("9223372036854775808"),
            Value::from(9_223_372_036_854_775_808f64)
        );
        assert!(to_value("9223372036854775808").is_f64());
        assert_eq!(to_value("-9223372036854775808"), Value::from(i64::MIN));
        assert!(to_value("1E3").is_f64());
        assert_eq!(to_value("-1E400"), Value::Null);
    }
}
