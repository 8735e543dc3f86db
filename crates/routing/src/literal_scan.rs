//! The snapshot document read in one pass, each value kept as the JSON string literal that
//! holds it: the reload path of [`crate::Table::parse_after`].
//!
//! A reload usually changes one value among thousands, and a full JSON parse of the file
//! spends nearly all its time checking string literals that have not changed. So each
//! value's literal is first compared byte for byte with the literal the previous table read
//! for the same key: when the bytes at the value's position start with that literal, the
//! value *is* that literal (a JSON string ends at its first unescaped quote, and the
//! previous literal, already checked, has exactly one, at its end), and the comparison is
//! all the checking it needs. Only new or changed literals are checked character by
//! character.
//!
//! This reader knows the format's common shape only. Anything else (an unknown field, a key
//! with an escape, a number that is not plain digits, `null`, a string PHP refuses) gives
//! `None`, and the exact reading decides, so this reader never accepts a file the exact
//! reading refuses.

/// The parts of a snapshot a table is built from, borrowed from the document.
pub(crate) struct Literals<'a> {
    pub revision: u64,
    /// `None` when the document has no `prefix`.
    pub prefix: Option<&'a str>,
    /// Every key with its value, in key order, the last of duplicated keys winning as in
    /// PHP.
    pub kvs: Vec<Entry<'a>>,
    /// The `stages` field as dw-agent writes it (ids without escapes, plain revisions).
    pub stages: Vec<crate::snapshot::AppliedStage>,
}

/// One key of `kvs` and its value as the JSON string literal that holds it (quotes
/// included).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry<'a> {
    pub key: &'a str,
    pub literal: &'a str,
    /// The index `known` gave with the literal, when the value is byte for byte that
    /// literal.
    pub unchanged: Option<usize>,
}

/// Reads `text`, a whole snapshot document. `known(key)` gives the literal a previous
/// reading held for `key`, if any, with an index of the caller's: matching bytes are taken
/// without checking them again, and their entry carries the index.
pub(crate) fn scan<'a, 'k>(
    text: &'a str,
    mut known: impl FnMut(&str) -> Option<(usize, &'k str)>,
) -> Option<Literals<'a>> {
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        at: 0,
    };
    let (mut format, mut revision, mut prefix, mut kvs) = (None, None, None, None);
    let mut cluster_id = None;
    let mut stages = None;
    // Read by `header` alone; a table is built from what it covers.
    let mut digest = None;
    reader.expect(b'{')?;
    loop {
        let name = reader.plain_string()?;
        reader.expect(b':')?;
        reader.skip_whitespace();
        // A field given twice goes to the exact reading.
        match name {
            "format" if format.is_none() => format = Some(reader.digits()?),
            "revision" if revision.is_none() => revision = Some(reader.digits()?),
            "prefix" if prefix.is_none() => prefix = Some(reader.plain_string()?),
            "kvs" if kvs.is_none() => kvs = Some(reader.kvs(&mut known)?),
            // Written by dw-agent, not used by a table: read past it.
            "cluster_id" if cluster_id.is_none() => cluster_id = Some(reader.plain_string()?),
            "stages" if stages.is_none() => stages = Some(reader.stages()?),
            "routing_digest" if digest.is_none() => digest = Some(reader.plain_string()?),
            _ => return None,
        }
        match reader.next_byte()? {
            b',' => continue,
            b'}' => break,
            _ => return None,
        }
    }
    reader.skip_whitespace();
    // PHP's is_int: a revision beyond i64 is a float there, and refused.
    let revision = revision.filter(|&revision| i64::try_from(revision).is_ok())?;
    if format? != crate::SNAPSHOT_FORMAT || reader.at != reader.bytes.len() {
        return None;
    }
    Some(Literals {
        revision,
        prefix,
        kvs: kvs?,
        stages: stages.unwrap_or_default(),
    })
}

/// The revision and `routing_digest` of a document, read from the fields before `kvs`
/// (see `crate::digest::snapshot_header`): `None` unless it starts with fields of the
/// common shape, each at most once, the digest among them, then `kvs`.
pub(crate) fn header(text: &str) -> Option<(u64, &str)> {
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        at: 0,
    };
    let (mut format, mut revision, mut digest) = (None, None, None);
    let mut seen: Vec<&str> = Vec::with_capacity(6);
    reader.expect(b'{')?;
    loop {
        let name = reader.plain_string()?;
        if seen.contains(&name) {
            return None;
        }
        seen.push(name);
        reader.expect(b':')?;
        reader.skip_whitespace();
        match name {
            "format" => format = Some(reader.digits()?),
            "revision" => revision = Some(reader.digits()?),
            "routing_digest" => digest = Some(reader.plain_string()?),
            "prefix" | "cluster_id" => {
                reader.plain_string()?;
            }
            "stages" => {
                reader.stages()?;
            }
            "kvs" => break,
            _ => return None,
        }
        reader.expect(b',')?;
    }
    // PHP's is_int, as in `scan`.
    let revision = revision.filter(|&revision| i64::try_from(revision).is_ok())?;
    if format? != crate::SNAPSHOT_FORMAT {
        return None;
    }
    Some((revision, digest.filter(|digest| !digest.is_empty())?))
}

/// The bytes that end a string without escapes: its closing quote, or what makes it not one
/// (a backslash, a control character).
static ENDS_PLAIN_STRING: [bool; 256] = {
    let mut ends = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        ends[byte] = true;
        byte += 1;
    }
    ends[b'"' as usize] = true;
    ends[b'\\' as usize] = true;
    ends
};

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, consumed.
    fn next_byte(&mut self) -> Option<u8> {
        self.skip_whitespace();
        let byte = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next_byte()? == byte).then_some(())
    }

    /// A non-negative integer written as plain digits, no leading zero.
    fn digits(&mut self) -> Option<u64> {
        let start = self.at;
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        let digits = &self.text[start..self.at];
        if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
            return None;
        }
        // `1.5`, `1e3`: not plain digits, so the exact reading decides.
        if matches!(self.bytes.get(self.at), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        digits.parse().ok()
    }

    /// A string without escapes, as its content (whitespace before it skipped).
    fn plain_string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.at;
        let length = self.bytes[start..]
            .iter()
            .position(|&byte| ENDS_PLAIN_STRING[byte as usize])?;
        self.at = start + length;
        (self.bytes[self.at] == b'"').then_some(())?;
        self.at += 1;
        Some(&self.text[start..start + length])
    }

    /// The `stages` array in dw-agent's shape: `[{"id":"...","revision":N},...]`; any other
    /// shape goes to the exact reading.
    fn stages(&mut self) -> Option<Vec<crate::snapshot::AppliedStage>> {
        self.expect(b'[')?;
        let mut stages = Vec::new();
        self.skip_whitespace();
        if self.bytes.get(self.at) == Some(&b']') {
            self.at += 1;
            return Some(stages);
        }
        loop {
            self.expect(b'{')?;
            (self.plain_string()? == "id").then_some(())?;
            self.expect(b':')?;
            let id = self.plain_string()?.to_owned();
            self.expect(b',')?;
            (self.plain_string()? == "revision").then_some(())?;
            self.expect(b':')?;
            self.skip_whitespace();
            let revision = self.digits()?;
            self.expect(b'}')?;
            stages.push(crate::snapshot::AppliedStage { id, revision });
            match self.next_byte()? {
                b',' => continue,
                b']' => return Some(stages),
                _ => return None,
            }
        }
    }

    /// A string literal with its quotes, checked by PHP's rules
    /// (`json::string_literal_end`), not decoded. The opening quote is at `self.at`.
    fn literal(&mut self) -> Option<&'a str> {
        let start = self.at;
        self.at = crate::json::string_literal_end(self.bytes, start)?;
        Some(&self.text[start..self.at])
    }

    /// The `kvs` object: keys without escapes, values string literals.
    fn kvs<'k>(
        &mut self,
        known: &mut impl FnMut(&str) -> Option<(usize, &'k str)>,
    ) -> Option<Vec<Entry<'a>>> {
        self.expect(b'{')?;
        let mut kvs = Vec::new();
        self.skip_whitespace();
        if self.bytes.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Some(kvs);
        }
        loop {
            let key = self.plain_string()?;
            self.expect(b':')?;
            self.skip_whitespace();
            if self.bytes.get(self.at) != Some(&b'"') {
                return None;
            }
            let entry = match known(key) {
                Some((index, literal)) if self.bytes[self.at..].starts_with(literal.as_bytes()) => {
                    self.at += literal.len();
                    Entry {
                        key,
                        literal: &self.text[self.at - literal.len()..self.at],
                        unchanged: Some(index),
                    }
                }
                _ => Entry {
                    key,
                    literal: self.literal()?,
                    unchanged: None,
                },
            };
            kvs.push(entry);
            match self.next_byte()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
        // dw-agent writes keys in byte order; anything else is put in order here, the last
        // of equal keys kept.
        if !kvs.windows(2).all(|pair| pair[0].key < pair[1].key) {
            kvs.reverse();
            kvs.sort_by(|a, b| a.key.cmp(b.key));
            kvs.dedup_by(|later, earlier| later.key == earlier.key);
        }
        Some(kvs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Snapshot, Table};

    /// The table a file gives through this reader (when it takes the file) and through the
    /// exact reading: they must route alike, or both refuse the file.
    fn assert_readings_agree(file: &str) {
        let exact = Snapshot::parse_exact(file.as_bytes()).map(|s| Table::from_snapshot(&s));
        let fast = Table::parse_after(file.as_bytes(), &Table::empty());
        match (&exact, &fast) {
            (Ok(exact), Ok(fast)) => assert_same_table(exact, fast, file),
            (Err(_), Err(_)) => {}
            _ => panic!("readings disagree on {file}: exact {exact:?}, fast {fast:?}"),
        }
    }

    fn assert_same_table(a: &Table, b: &Table, file: &str) {
        assert_eq!(a.revision(), b.revision(), "{file}");
        assert_eq!(a.prefix(), b.prefix(), "{file}");
        assert_eq!(a.policy(), b.policy(), "{file}");
        assert_eq!(a.invalid_keys(), b.invalid_keys(), "{file}");
        assert!(a.regions().eq(b.regions()), "{file}");
    }

    const DE: &str =
        r#""{\"shard\":\"eu-1\",\"origins\":[\"a\",\"b\"],\"weight\":{\"a\":1,\"b\":2}}""#;
    const FR: &str = r#""{\"shard\":\"eu-\u00e9\/2\",\"origins\":[\"c\"],\"weight\":{\"c\":1}}""#;

    #[test]
    fn the_agents_own_files_take_this_reading() {
        let mut snapshot = Snapshot::new(7, "/other/");
        snapshot
            .kvs
            .insert("/other/region/DE".into(), r#"{"shard":"é\"x"}"#.into());
        snapshot.kvs.insert("/other/origin/a".into(), "\n".into());
        // dw-agent's cluster id does not take the file off the common path.
        snapshot.cluster_id = Some("14841639068965178418".into());
        let bytes = snapshot.to_json();
        let text = std::str::from_utf8(&bytes).unwrap();
        let literals = scan(text, |_| None).expect("the common shape");
        assert_eq!((literals.revision, literals.prefix), (7, Some("/other/")));
        let keys: Vec<&str> = literals.kvs.iter().map(|entry| entry.key).collect();
        assert_eq!(keys, ["/other/origin/a", "/other/region/DE"]);
        assert_eq!(literals.kvs[0].literal, r#""\n""#);
        assert!(literals.kvs.iter().all(|entry| entry.unchanged.is_none()));
    }

    #[test]
    fn every_shape_reads_as_the_exact_reading_reads_it() {
        let files = [
            format!(r#"{{"format":1,"revision":3,"kvs":{{"/dw/routing/region/DE":{DE}}}}}"#),
            // Whitespace everywhere, fields in another order, an escaped value.
            format!(
                " \n{{ \"kvs\" :\t{{ \"/p/region/FR\" : {FR} ,\r\"/p/region/DE\":{DE} }} , \"prefix\" : \"/p/\", \"revision\":12,\"format\":1 }}\n"
            ),
            // Out of order and duplicated keys: the last of equal keys wins.
            format!(
                r#"{{"format":1,"revision":3,"kvs":{{"/dw/routing/region/FR":{DE},"/dw/routing/region/DE":"{{}}","/dw/routing/region/FR":{FR},"/dw/routing/region/DE":{DE}}}}}"#
            ),
            // Escaped keys, null prefix, unknown fields, odd numbers: the exact reading's.
            format!(r#"{{"format":1,"revision":3,"kvs":{{"/dw/routing/region/\u0044E":{DE}}}}}"#),
            format!(
                r#"{{"format":1,"revision":3,"prefix":null,"kvs":{{"/dw/routing/region/DE":{DE}}}}}"#
            ),
            format!(
                r#"{{"format":1,"revision":3,"x":[1,{{}}],"kvs":{{"/dw/routing/region/DE":{DE}}}}}"#
            ),
            // The agent's cluster id: a string is read past, anything else is the exact
            // reading's (which ignores it).
            format!(
                r#"{{"format":1,"revision":3,"cluster_id":"42","kvs":{{"/dw/routing/region/DE":{DE}}}}}"#
            ),
            r#"{"format":1,"revision":3,"cluster_id":42,"kvs":{}}"#.into(),
            r#"{"format":1,"revision":3,"cluster_id":"4","kvs":{}}"#.into(),
            r#"{"format":1,"revision":3,"cluster_id":"1","cluster_id":"2","kvs":{}}"#.into(),
            r#"{"format":1,"revision":3.0,"kvs":{}}"#.into(),
            r#"{"format":1,"revision":1e2,"kvs":{}}"#.into(),
            r#"{"format":1,"revision":03,"kvs":{}}"#.into(),
            r#"{"format":1,"revision":-3,"kvs":{}}"#.into(),
            r#"{"format":1,"revision":9223372036854775808,"kvs":{}}"#.into(),
            r#"{"format":1,"revision":99999999999999999999999,"kvs":{}}"#.into(),
            r#"{"format":2,"revision":3,"kvs":{}}"#.into(),
            r#"{"format":1,"revision":3,"revision":4,"kvs":{}}"#.into(),
            r#"{"format":1,"kvs":{}}"#.into(),
            r#"{"format":1,"revision":3,"kvs":{},}"#.into(),
            r#"{"format":1,"revision":3,"kvs":{"a":"b",}}"#.into(),
            r#"{"format":1,"revision":3,"kvs":{"a":1}}"#.into(),
            r#"{"format":1,"revision":3,"kvs":{"a":"b"}} x"#.into(),
            r#"{"format":1,"revision":3,"kvs":{"a":"\x"}}"#.into(),
            r#"{"format":1,"revision":3,"kvs":{"a":"\u12"}}"#.into(),
            "{\"format\":1,\"revision\":3,\"kvs\":{\"a\":\"tab\there\"}}".into(),
            r#"{"format":1,"revision":3,"kvs":{"a":"\ud800"}}"#.into(),
            r#"{"format":1,"revision":3,"kvs":{"a":"\uD83D\uDE00"}}"#.into(),
            r#"{"format":1,"revision":3,"kvs":{"/dw/routing/region/DE":"\udc00"}}"#.into(),
            r#"{"format":1,"revision":3,"kvs":{"a":"b"}"#.into(),
            r#"{"format":1,"revision":3,"kvs":{}}"#.into(),
            String::new(),
        ];
        for file in &files {
            assert_readings_agree(file);
        }
    }

    #[test]
    fn a_changed_prefix_reads_as_a_fresh_read() {
        // Under prefix /a/ the key /a/region/region/DE is geo "region/DE"; under prefix
        // /a/region/ the same key is geo "DE", and /a/region/DE is no region at all.
        let file = |prefix: &str| {
            format!(
                r#"{{"format":1,"revision":3,"prefix":"{prefix}","kvs":{{"/a/region/DE":{FR},"/a/region/region/DE":{DE}}}}}"#
            )
        };
        let first = Table::parse_after(file("/a/").as_bytes(), &Table::empty()).unwrap();
        assert_eq!(first.region_count(), 2);
        let after = Table::parse_after(file("/a/region/").as_bytes(), &first).unwrap();
        let fresh = Table::parse_after(file("/a/region/").as_bytes(), &Table::empty()).unwrap();
        assert_same_table(&after, &fresh, "prefix /a/region/");
        assert_eq!(after.region(b"DE").unwrap().shard(), "eu-1");
    }

    #[test]
    fn a_known_literal_is_taken_only_when_every_byte_matches() {
        let file = |value: &str| {
            format!(r#"{{"format":1,"revision":3,"kvs":{{"/dw/routing/region/DE":{value}}}}}"#)
        };
        let first = Table::parse_after(file(DE).as_bytes(), &Table::empty()).unwrap();
        assert_eq!(first.region_count(), 1);
        // The old literal with one more escaped character before its closing quote, and a
        // value that only starts like it: neither is taken as the old one.
        let longer = format!(r#"{}\"""#, &DE[..DE.len() - 1]);
        for value in [longer.as_str(), r#""{\"shard\":\"eu-1\"}""#, FR] {
            let after = Table::parse_after(file(value).as_bytes(), &first);
            let fresh = Table::parse_after(file(value).as_bytes(), &Table::empty());
            match (after, fresh) {
                (Ok(after), Ok(fresh)) => assert_same_table(&after, &fresh, value),
                (after, fresh) => panic!("{value}: {after:?} / {fresh:?}"),
            }
        }
        // The same bytes: the region is shared, not read again.
        let same = Table::parse_after(file(DE).as_bytes(), &first).unwrap();
        assert!(std::ptr::eq(
            same.region(b"DE").unwrap(),
            first.region(b"DE").unwrap()
        ));
    }
}
