//! The snapshot file: parsing from bytes and serialising, nothing else.
//! The format is documented in docs/snapshot-format.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use xxhash_rust::xxh3::Xxh3Default;

use crate::Error;
use crate::json::{self, Kind};
use crate::quoted;

/// A stage a node applies, as the effective snapshot names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedStage {
    /// The stage id.
    pub id: String,
    /// The `mod_revision` of the stage's key the node applied.
    pub revision: u64,
}

/// The only snapshot format this crate reads or writes.
pub const SNAPSHOT_FORMAT: u64 = 1;

use crate::keys::{DEFAULT_PREFIX, POLICY, REGION};

/// A parsed snapshot: every key under the prefix and its raw value, at one revision.
///
/// Values stay raw strings here. Interpreting them is the table's job, so that one bad
/// value spoils only its own key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The etcd revision the keys were read at.
    pub revision: u64,
    /// The etcd prefix the keys were read under, such as [`DEFAULT_PREFIX`].
    pub prefix: String,
    /// The id of the etcd cluster the state came from (dw-agent writes it, as a decimal
    /// string); `None` in files written without one. Readers other than the agent ignore it.
    pub cluster_id: Option<String>,
    /// Every key (in full, prefix included) with its raw value, in key order.
    pub kvs: BTreeMap<String, String>,
    /// The stages applied to `kvs` for the node that wrote the file (dw-agent applies its
    /// node's stages, see [`crate::stage`]); empty when none, and then not written.
    /// Informative: a value that cannot be read is taken as empty, never refuses the file.
    pub stages: Vec<AppliedStage>,
}

impl Snapshot {
    /// An empty snapshot at `revision` under `prefix`, with no cluster id.
    pub fn new(revision: u64, prefix: impl Into<String>) -> Snapshot {
        Snapshot {
            revision,
            prefix: prefix.into(),
            cluster_id: None,
            kvs: BTreeMap::new(),
            stages: Vec::new(),
        }
    }

    /// Parses a snapshot file's bytes. Unknown top-level fields are ignored.
    ///
    /// The file is read as PHP's `json_decode()` reads it (see the `json` module), so that
    /// this crate and the userland twin refuse exactly the same files.
    pub fn parse(bytes: &[u8]) -> Result<Snapshot, Error> {
        if bytes.is_empty() {
            return Err(Error::Snapshot("empty file".into()));
        }
        if let Some(snapshot) = Snapshot::parse_common(bytes) {
            return Ok(snapshot);
        }
        Snapshot::parse_exact(bytes)
    }

    /// The common case in one serde pass; `None` whenever it might not agree with the
    /// exact reading (which then decides and explains), as for regions.
    fn parse_common(bytes: &[u8]) -> Option<Snapshot> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Common {
            format: u64,
            revision: u64,
            #[serde(default)]
            prefix: Option<String>,
            #[serde(default)]
            cluster_id: Option<String>,
            #[serde(default)]
            stages: Vec<AppliedStage>,
            // Read by readers that keep a table (crate::digest), not part of a snapshot.
            #[serde(default, rename = "routing_digest")]
            _routing_digest: Option<String>,
            kvs: BTreeMap<String, String>,
        }
        let common: Common = serde_json::from_str(common_text(bytes)?).ok()?;
        // PHP's is_int: a revision beyond i64 is a float there, and refused.
        if common.format != SNAPSHOT_FORMAT || i64::try_from(common.revision).is_err() {
            return None;
        }
        Some(Snapshot {
            revision: common.revision,
            prefix: common.prefix.unwrap_or_else(|| DEFAULT_PREFIX.to_owned()),
            cluster_id: common.cluster_id,
            kvs: common.kvs,
            stages: common.stages,
        })
    }

    /// The exact reading, PHP's `json_decode()` rules at every edge.
    pub(crate) fn parse_exact(bytes: &[u8]) -> Result<Snapshot, Error> {
        let text = json::validate(bytes).map_err(Error::Snapshot)?;
        let members = json::object_members(text).ok_or_else(|| {
            Error::Snapshot(format!("is {}, not an object", Kind::of(text).described()))
        })?;
        let field = |name: &'static str| {
            json::member(&members, name)
                .map(RawValue::get)
                .ok_or_else(|| Error::Snapshot(format!("lacks `{name}`")))
        };
        let (format, revision, kvs) = (field("format")?, field("revision")?, field("kvs")?);

        if json::integer(format) != Some(SNAPSHOT_FORMAT as i64) {
            return Err(Error::Snapshot(format!(
                "unsupported format {} (this reader knows {SNAPSHOT_FORMAT})",
                quoted(format)
            )));
        }
        let revision = json::integer(revision)
            .and_then(|revision| u64::try_from(revision).ok())
            .ok_or_else(|| {
                Error::Snapshot(format!(
                    "revision {} is not a non-negative integer",
                    quoted(revision)
                ))
            })?;
        // Optional; null counts as absent, another type refuses the file.
        let prefix = match field("prefix").ok() {
            None => DEFAULT_PREFIX.to_owned(),
            Some(prefix) if Kind::of(prefix) == Kind::Null => DEFAULT_PREFIX.to_owned(),
            Some(prefix) => json::string(prefix)
                .ok_or_else(|| Error::Snapshot("prefix is not a string".into()))?,
        };
        // Optional and informative only: a value that is not a string is ignored, as an
        // unknown field would be, so that no reader refuses a file over it.
        let cluster_id = field("cluster_id").ok().and_then(json::string);
        if Kind::of(kvs) != Kind::Object {
            return Err(Error::Snapshot("kvs is not an object".into()));
        }
        // A map insert keeps the last of duplicated keys, as PHP does.
        let kvs: BTreeMap<String, String> = serde_json::from_str(kvs)
            .map_err(|e| Error::Snapshot(format!("kvs holds a non-string value: {e}")))?;

        // Informative, like the cluster id: unreadable is empty.
        let stages = field("stages")
            .ok()
            .and_then(|stages| serde_json::from_str(stages).ok())
            .unwrap_or_default();
        Ok(Snapshot {
            revision,
            prefix,
            cluster_id,
            kvs,
            stages,
        })
    }

    /// Serialises to the documented format: compact JSON, keys in byte order.
    pub fn to_json(&self) -> Vec<u8> {
        SnapshotWriter::new().to_json(self)
    }
}

/// Serialises snapshot after snapshot, as dw-agent publishes them: each key's
/// `"key":"value"` member is kept and reused while the key's value stays the same, so a
/// change to one key costs escaping that one value, not the whole file again (at 2,500
/// regions, escaping the file takes about a millisecond).
///
/// Only the key and its serialised member are kept, not a copy of the value: whether a
/// value is unchanged is decided by comparing it with the member's escaped text in place
/// (no allocation). That keeps the writer at about one copy of the state instead of two.
#[derive(Debug, Default)]
pub struct SnapshotWriter {
    /// (key, the member as serialised), in key order, of the last snapshot written.
    members: Vec<(String, String)>,
}

impl SnapshotWriter {
    /// A writer that has written nothing yet.
    pub fn new() -> SnapshotWriter {
        SnapshotWriter::default()
    }

    /// `snapshot` in the documented format: compact JSON, keys in byte order, strings
    /// escaped as serde_json escapes them ([`Snapshot::to_json`] is a fresh writer's).
    pub fn to_json(&mut self, snapshot: &Snapshot) -> Vec<u8> {
        let mut out = Vec::new();
        // Writing into a Vec cannot fail.
        let _ = self.write_json(snapshot, &mut out);
        out
    }

    /// [`SnapshotWriter::to_json`] written to `out` as it is produced, so that a publisher
    /// need not hold the whole file in memory besides the members (tens of megabytes at
    /// 100,000 keys). The members are updated even when writing fails: they describe the
    /// snapshot, not the file.
    pub fn write_json(
        &mut self,
        snapshot: &Snapshot,
        out: &mut impl std::io::Write,
    ) -> std::io::Result<()> {
        let mut previous = std::mem::take(&mut self.members).into_iter().peekable();
        let mut members = Vec::with_capacity(snapshot.kvs.len());
        for (key, value) in &snapshot.kvs {
            // Both in key order: skip what was removed, take what is unchanged.
            while previous.next_if(|(old, _)| old < key).is_some() {}
            let member = match previous
                .next_if(|(old, member)| old == key && member_is(member, key, value))
            {
                Some(unchanged) => unchanged,
                None => {
                    let member = format!("{}:{}", json_string(key), json_string(value));
                    (key.clone(), member)
                }
            };
            members.push(member);
        }
        drop(previous);
        self.members = members;
        let mut head = Vec::with_capacity(snapshot.prefix.len() + 96);
        head.extend_from_slice(b"{\"format\":");
        head.extend_from_slice(SNAPSHOT_FORMAT.to_string().as_bytes());
        head.extend_from_slice(b",\"revision\":");
        head.extend_from_slice(snapshot.revision.to_string().as_bytes());
        head.extend_from_slice(b",\"prefix\":");
        head.extend_from_slice(json_string(&snapshot.prefix).as_bytes());
        if let Some(cluster_id) = &snapshot.cluster_id {
            head.extend_from_slice(b",\"cluster_id\":");
            head.extend_from_slice(json_string(cluster_id).as_bytes());
        }
        if !snapshot.stages.is_empty() {
            head.extend_from_slice(b",\"stages\":");
            // Strings and integers: serialising cannot fail.
            head.extend_from_slice(&serde_json::to_vec(&snapshot.stages).unwrap_or_default());
        }
        // Before kvs, so that a reader finds it in the first bytes (crate::digest).
        head.extend_from_slice(b",\"routing_digest\":");
        head.extend_from_slice(json_string(&routing_digest(snapshot)).as_bytes());
        head.extend_from_slice(b",\"kvs\":{");
        out.write_all(&head)?;
        for (index, (_, member)) in self.members.iter().enumerate() {
            if index > 0 {
                out.write_all(b",")?;
            }
            out.write_all(member.as_bytes())?;
        }
        out.write_all(b"}}")
    }
}

/// What every digest this crate writes starts with: the algorithm and what it covers, so
/// that a later writer can change either without a reader mistaking one for the other.
pub const DIGEST_SCHEME: &str = "xxh3-128/1:";

/// The digest of what a table is built from in `snapshot`: its prefix, the keys and values
/// of its region keys and its policy key, and its applied stages. Lengths frame every part,
/// so that no two different inputs hash the same bytes.
pub fn routing_digest(snapshot: &Snapshot) -> String {
    let mut hasher = Xxh3Default::new();
    let mut part = |bytes: &[u8]| {
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    part(snapshot.prefix.as_bytes());
    let policy = format!("{}{POLICY}", snapshot.prefix);
    let regions = format!("{}{REGION}", snapshot.prefix);
    for (key, value) in &snapshot.kvs {
        if key.starts_with(&regions) || *key == policy {
            part(key.as_bytes());
            part(value.as_bytes());
        }
    }
    part(b"stages");
    for stage in &snapshot.stages {
        part(stage.id.as_bytes());
        part(&stage.revision.to_le_bytes());
    }
    format!("{DIGEST_SCHEME}{:032x}", hasher.digest128())
}

/// Whether `member` is exactly `json_string(key):json_string(value)`, checked in place.
fn member_is(member: &str, key: &str, value: &str) -> bool {
    let check = || {
        let rest = member.as_bytes().strip_prefix(b"\"")?;
        let rest = strip_escaped(rest, key)?;
        let rest = rest.strip_prefix(b"\":\"")?;
        let rest = strip_escaped(rest, value)?;
        (rest == b"\"").then_some(())
    };
    check().is_some()
}

/// When `escaped` starts with `text` escaped as serde_json escapes a string's contents,
/// what follows it.
fn strip_escaped<'a>(escaped: &'a [u8], text: &str) -> Option<&'a [u8]> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut rest = escaped;
    for &byte in text.as_bytes() {
        let mut unicode = *b"\\u0000";
        let expected: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x09 => b"\\t",
            0x0A => b"\\n",
            0x0C => b"\\f",
            0x0D => b"\\r",
            0x00..=0x1F => {
                unicode[4] = HEX[usize::from(byte >> 4)];
                unicode[5] = HEX[usize::from(byte & 0xF)];
                &unicode
            }
            _ => {
                let (&first, tail) = rest.split_first()?;
                if first != byte {
                    return None;
                }
                rest = tail;
                continue;
            }
        };
        rest = rest.strip_prefix(expected)?;
    }
    Some(rest)
}

/// `text` as a JSON string literal, escaped as serde_json escapes it.
fn json_string(text: &str) -> String {
    // Serialising a string cannot fail.
    serde_json::to_string(text).unwrap_or_default()
}

/// `bytes` as text when the common-case (one-pass serde) reading of a snapshot can be
/// trusted to agree with the exact one: an object, in UTF-8.
///
/// The one-pass readers deny unknown fields and take only strings as values, so nothing
/// nests deeper than the format does; a lone surrogate escape makes serde_json fail on
/// the key or value that holds it, which hands the file to the exact reading too.
pub(crate) fn common_text(bytes: &[u8]) -> Option<&str> {
    if !json::starts_with_object(bytes) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_recognised_in_place_exactly() {
        let every_byte: String = (0u8..0x80).map(char::from).collect();
        for (key, value) in [
            ("/dw/routing/region/DE", r#"{"shard":"eu-1"}"#),
            ("k", ""),
            ("k\\\"", "v\u{1}\u{1f}\n\té\u{7f}"),
            ("k", every_byte.as_str()),
        ] {
            let member = format!("{}:{}", json_string(key), json_string(value));
            assert!(member_is(&member, key, value), "{member}");
            assert!(!member_is(&member, key, &format!("{value}x")));
            assert!(!member_is(&member, &format!("{key}x"), value));
            if !value.is_empty() {
                assert!(!member_is(&member, key, &value[..value.len() - 1]));
            }
        }
    }

    #[test]
    fn a_huge_revision_is_not_echoed_whole() {
        let digits = "9".repeat(100_000);
        for revision in [
            digits.clone(),
            format!("-{digits}"),
            format!("\"{digits}\""),
        ] {
            let text = format!(r#"{{"format":1,"revision":{revision},"kvs":{{}}}}"#);
            let message = Snapshot::parse(text.as_bytes())
                .expect_err("refused")
                .to_string();
            assert!(
                message.len() < 200,
                "{} bytes: {message:.300}",
                message.len()
            );
            assert!(message.contains("…"), "{message}");
        }
        let text = format!(r#"{{"format":{digits},"revision":1,"kvs":{{}}}}"#);
        let message = Snapshot::parse(text.as_bytes())
            .expect_err("refused")
            .to_string();
        assert!(message.len() < 200, "{message:.300}");
    }

    #[test]
    fn the_writer_writes_the_format_snapshot_after_snapshot() {
        // The reference: serde_json serialising the documented object, fields in order.
        let reference = |snapshot: &Snapshot| {
            let mut object = serde_json::Map::new();
            object.insert("format".into(), SNAPSHOT_FORMAT.into());
            object.insert("revision".into(), snapshot.revision.into());
            object.insert("prefix".into(), snapshot.prefix.clone().into());
            if let Some(cluster_id) = &snapshot.cluster_id {
                object.insert("cluster_id".into(), cluster_id.clone().into());
            }
            object.insert("routing_digest".into(), routing_digest(snapshot).into());
            let kvs = snapshot
                .kvs
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into()));
            object.insert("kvs".into(), serde_json::Map::from_iter(kvs).into());
            String::from_utf8(serde_json::to_vec(&object).unwrap()).unwrap()
        };
        let mut writer = SnapshotWriter::new();
        let mut snapshot = Snapshot::new(1, "/p/\"q\"/");
        assert_eq!(
            String::from_utf8(writer.to_json(&snapshot)).unwrap(),
            reference(&snapshot)
        );
        // Keys added, changed, removed, re-added; values that need escaping.
        let steps: [(&str, Option<&str>); 9] = [
            ("/p/region/DE", Some(r#"{"shard":"é\"1"}"#)),
            ("/p/a", Some("\n\u{1}")),
            ("/p/region/FR", Some("x")),
            ("/p/region/DE", Some("changed")),
            ("/p/a", None),
            ("/p/zz", Some("")),
            ("/p/region/FR", None),
            ("/p/a", Some("back")),
            ("/p/region/DE", Some("changed")),
        ];
        for (step, (key, value)) in steps.into_iter().enumerate() {
            snapshot.revision = step as u64 + 2;
            match value {
                Some(value) => snapshot.kvs.insert(key.into(), value.into()),
                None => snapshot.kvs.remove(key),
            };
            let written = writer.to_json(&snapshot);
            assert_eq!(
                String::from_utf8(written).unwrap(),
                reference(&snapshot),
                "step {step}"
            );
        }
        // With the cluster id dw-agent records.
        snapshot.cluster_id = Some("14841639068965178418".into());
        assert_eq!(
            String::from_utf8(writer.to_json(&snapshot)).unwrap(),
            reference(&snapshot)
        );
        // An unrelated snapshot after those: nothing carries over wrongly.
        let other = Snapshot::new(9, DEFAULT_PREFIX);
        assert_eq!(
            String::from_utf8(writer.to_json(&other)).unwrap(),
            reference(&other)
        );
    }

    #[test]
    fn round_trips() {
        let mut snapshot = Snapshot::new(42, DEFAULT_PREFIX);
        snapshot
            .kvs
            .insert("/dw/routing/region/DE".into(), r#"{"shard":"eu-1"}"#.into());
        let parsed = Snapshot::parse(&snapshot.to_json()).unwrap();
        assert_eq!(parsed, snapshot);
    }

    #[test]
    fn the_cluster_id_is_read_when_a_string_and_ignored_otherwise() {
        let mut snapshot = Snapshot::new(42, DEFAULT_PREFIX);
        snapshot.cluster_id = Some("7".into());
        snapshot
            .kvs
            .insert("/dw/routing/region/DE".into(), "{}".into());
        assert_eq!(Snapshot::parse(&snapshot.to_json()).unwrap(), snapshot);
        for (text, expected) in [
            (
                r#"{"format":1,"revision":1,"cluster_id":"12","kvs":{}}"#,
                Some("12"),
            ),
            (
                r#"{"format":1,"revision":1,"cluster_id":"1","kvs":{}}"#,
                Some("1"),
            ),
            (
                r#"{"format":1,"revision":1,"cluster_id":12,"kvs":{}}"#,
                None,
            ),
            (
                r#"{"format":1,"revision":1,"cluster_id":null,"kvs":{}}"#,
                None,
            ),
            (
                r#"{"format":1,"revision":1,"cluster_id":["x"],"kvs":{}}"#,
                None,
            ),
            (r#"{"format":1,"revision":1,"kvs":{}}"#, None),
        ] {
            let parsed = Snapshot::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(parsed.cluster_id.as_deref(), expected, "{text}");
        }
    }

    #[test]
    fn rejects_what_the_format_forbids() {
        for bad in [
            &b""[..],
            b"null",
            b"[]",
            b"{\"format\":2,\"revision\":1,\"kvs\":{}}",
            b"{\"format\":1,\"revision\":-1,\"kvs\":{}}",
            b"{\"format\":1,\"revision\":1.5,\"kvs\":{}}",
            b"{\"format\":1,\"revision\":1,\"kvs\":[]}",
            b"{\"format\":1,\"revision\":1,\"kvs\":{\"k\":{}}}",
            b"{\"format\":1,\"kvs\":{}}",
            b"{\"format\":1,\"revision\":1,\"kvs\":{}",
        ] {
            assert!(
                Snapshot::parse(bad).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn ignores_unknown_fields_and_defaults_the_prefix() {
        let parsed =
            Snapshot::parse(br#"{"format":1,"revision":7,"kvs":{},"written_by":"x"}"#).unwrap();
        assert_eq!(parsed.prefix, DEFAULT_PREFIX);
        assert_eq!(parsed.revision, 7);
    }

    #[test]
    fn rejects_what_the_twin_rejects() {
        for bad in [
            r#"{"format":"1","revision":1,"kvs":{}}"#,
            r#"{"format":1.0,"revision":1,"kvs":{}}"#,
            r#"{"format":1,"revision":"1","kvs":{}}"#,
            r#"{"format":1,"revision":9223372036854775808,"kvs":{}}"#,
            r#"{"format":1,"revision":1,"kvs":{},"prefix":5}"#,
            r#"{"format":1,"revision":1,"kvs":{"a":"x","b":null}}"#,
            r#"{"format":1,"revision":1}"#,
            r#"{"revision":1,"kvs":{}}"#,
            r#"{"format":1,"revision":1,"kvs":{"a":"\ud800"}}"#,
        ] {
            assert!(Snapshot::parse(bad.as_bytes()).is_err(), "accepted {bad}");
        }
    }

    #[test]
    fn reads_json_as_php_does() {
        // Duplicate fields: the last wins. `-0` is an integer. Null prefix means absent.
        // Unknown fields may nest up to PHP's limit and hold numbers beyond a double.
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let text = format!(
            r#"{{"format":2,"format":1,"revision":-0,"prefix":null,"extra":[{deep},1e400],
               "kvs":{{"/k":"a","/k":"b","/j":"\u00e9"}}}}"#
        );
        let parsed = Snapshot::parse(text.as_bytes()).unwrap();
        assert_eq!(parsed.revision, 0);
        assert_eq!(parsed.prefix, DEFAULT_PREFIX);
        assert_eq!(parsed.kvs["/k"], "b");
        assert_eq!(parsed.kvs["/j"], "é");
        let parsed = Snapshot::parse(
            br#"{"format":1,"revision":9223372036854775807,"prefix":"/p/","kvs":{}}"#,
        )
        .unwrap();
        assert_eq!(parsed.revision, i64::MAX as u64);
        assert_eq!(parsed.prefix, "/p/");
    }
}
