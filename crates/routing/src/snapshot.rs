//! The snapshot file: parsing from bytes and serialising, nothing else.
//! The format is documented in docs/snapshot-format.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Error;

/// The only snapshot format this crate reads or writes.
pub const SNAPSHOT_FORMAT: u64 = 1;

/// The etcd prefix mirrored when a snapshot does not name one.
pub const DEFAULT_PREFIX: &str = "/dw/routing/";

/// A parsed snapshot: every key under the prefix and its raw value, at one revision.
///
/// Values stay raw strings here. Interpreting them is the table's job, so that one bad
/// value spoils only its own key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub revision: u64,
    pub prefix: String,
    pub kvs: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct WireIn {
    format: serde_json::Value,
    revision: serde_json::Value,
    #[serde(default)]
    prefix: Option<String>,
    kvs: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct WireOut<'a> {
    format: u64,
    revision: u64,
    prefix: &'a str,
    kvs: &'a BTreeMap<String, String>,
}

impl Snapshot {
    pub fn new(revision: u64, prefix: impl Into<String>) -> Snapshot {
        Snapshot {
            revision,
            prefix: prefix.into(),
            kvs: BTreeMap::new(),
        }
    }

    /// Parses a snapshot file's bytes. Unknown top-level fields are ignored.
    pub fn parse(bytes: &[u8]) -> Result<Snapshot, Error> {
        if bytes.is_empty() {
            return Err(Error::Snapshot("empty file".into()));
        }
        let wire: WireIn = serde_json::from_slice(bytes)
            .map_err(|e| Error::Snapshot(format!("not a format-1 snapshot: {e}")))?;
        if wire.format.as_u64() != Some(SNAPSHOT_FORMAT) {
            return Err(Error::Snapshot(format!(
                "unsupported format {} (this reader knows {SNAPSHOT_FORMAT})",
                wire.format
            )));
        }
        let revision = wire.revision.as_u64().ok_or_else(|| {
            Error::Snapshot(format!(
                "revision {} is not a non-negative integer",
                wire.revision
            ))
        })?;
        Ok(Snapshot {
            revision,
            prefix: wire.prefix.unwrap_or_else(|| DEFAULT_PREFIX.to_owned()),
            kvs: wire.kvs,
        })
    }

    /// Serialises to the documented format: compact JSON, keys in byte order.
    pub fn to_json(&self) -> Vec<u8> {
        let wire = WireOut {
            format: SNAPSHOT_FORMAT,
            revision: self.revision,
            prefix: &self.prefix,
            kvs: &self.kvs,
        };
        // Serialising strings and integers into a Vec cannot fail.
        serde_json::to_vec(&wire).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
