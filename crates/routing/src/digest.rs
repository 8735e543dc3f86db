//! The snapshot's `routing_digest`: one string naming everything a table is built from, so
//! that a reader whose table came from a file with the same digest knows, from the file's
//! first bytes, that parsing it would give the same answers (docs/snapshot-format.md).
//!
//! A table reads the prefix, every `<prefix>region/` key, `<prefix>policy/global` and the
//! applied stages; `origin/` keys and anything else below the prefix never change an
//! answer. A burst of writes to an origin's record then makes no worker re-parse. The
//! writer's half, [`crate::routing_digest`], is in `snapshot`, beside the writer.

use crate::literal_scan;

/// A snapshot file's revision and `routing_digest`, read from its first fields alone (they
/// come before `kvs` in every file dw-agent writes). `None` when the file has no digest
/// there, or its start is not of the common shape: the reader then parses the file.
///
/// Cheap at any size: only the bytes before `kvs` are looked at. It proves nothing about
/// the rest of the file, which is the writer's (dw-agent renames only complete files).
pub fn snapshot_header(bytes: &[u8]) -> Option<(u64, &str)> {
    // The fields before `kvs` are short: their text is in the first few kilobytes.
    let head = &bytes[..bytes.len().min(64 * 1024)];
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // Cut in the middle of a character (or invalid later on): what comes before.
        Err(error) => std::str::from_utf8(&head[..error.valid_up_to()]).ok()?,
    };
    literal_scan::header(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{AppliedStage, DIGEST_SCHEME, Snapshot, routing_digest};

    fn snapshot(kvs: &[(&str, &str)]) -> Snapshot {
        let mut snapshot = Snapshot::new(9, "/p/");
        for (key, value) in kvs {
            snapshot.kvs.insert((*key).to_owned(), (*value).to_owned());
        }
        snapshot
    }

    #[test]
    fn covers_what_tables_read_and_nothing_else() {
        let base = [
            ("/p/region/DE", "{\"a\":1}"),
            ("/p/policy/global", "{}"),
            ("/p/origin/fra-a", "{\"addr\":1}"),
        ];
        let digest = routing_digest(&snapshot(&base));
        assert!(digest.starts_with(DIGEST_SCHEME) && digest.len() == DIGEST_SCHEME.len() + 32);
        // Origins, other kinds, another revision or cluster: the same digest.
        let mut same = snapshot(&[
            ("/p/region/DE", "{\"a\":1}"),
            ("/p/policy/global", "{}"),
            ("/p/origin/fra-a", "{\"addr\":2}"),
            ("/p/origin/new", "{}"),
            ("/p/policy/other", "{}"),
        ]);
        same.revision = 10;
        same.cluster_id = Some("7".into());
        assert_eq!(routing_digest(&same), digest);
        // Anything a table reads: another digest.
        let mut changed = vec![
            snapshot(&[base[0], base[2]]),
            snapshot(&[("/p/region/DE", "{\"a\":2}"), base[1], base[2]]),
            snapshot(&[("/p/region/FR", "{\"a\":1}"), base[1], base[2]]),
            snapshot(&[base[0], ("/p/policy/global", "{ }"), base[2]]),
            snapshot(&[base[0], base[1], base[2], ("/p/region/continent/EU", "{}")]),
        ];
        let mut other_prefix = snapshot(&base);
        other_prefix.prefix = "/q/".into();
        changed.push(other_prefix);
        let mut staged = snapshot(&base);
        staged.stages.push(AppliedStage {
            id: "s".into(),
            revision: 4,
        });
        changed.push(staged);
        for snapshot in changed {
            assert_ne!(routing_digest(&snapshot), digest, "{snapshot:?}");
        }
        // Framing: moving a byte from a key to its value changes the digest.
        assert_ne!(
            routing_digest(&snapshot(&[("/p/region/DEx", "y")])),
            routing_digest(&snapshot(&[("/p/region/DE", "xy")]))
        );
    }

    #[test]
    fn the_header_is_read_from_the_fields_before_kvs() {
        let mut state = snapshot(&[("/p/region/DE", "{}")]);
        state.cluster_id = Some("7".into());
        let bytes = state.to_json();
        let digest = routing_digest(&state);
        assert_eq!(snapshot_header(&bytes), Some((9, digest.as_str())));
        // Every field before kvs, in the order dw-agent writes them, stages included.
        let text = format!(
            r#"{{"format":1,"revision":12,"prefix":"/p/","cluster_id":"7","stages":[{{"id":"a","revision":3}}],"routing_digest":"{digest}","kvs":{{}}}}"#
        );
        assert_eq!(
            snapshot_header(text.as_bytes()),
            Some((12, digest.as_str()))
        );
        for refused in [
            // No digest, a digest after kvs, another format, a revision PHP would refuse.
            r#"{"format":1,"revision":12,"kvs":{}}"#.to_owned(),
            format!(r#"{{"format":1,"revision":12,"kvs":{{}},"routing_digest":"{digest}"}}"#),
            format!(r#"{{"format":2,"revision":12,"routing_digest":"{digest}","kvs":{{}}}}"#),
            format!(
                r#"{{"format":1,"revision":9223372036854775808,"routing_digest":"{digest}","kvs":{{}}}}"#
            ),
            format!(r#"{{"format":1,"revision":1.5,"routing_digest":"{digest}","kvs":{{}}}}"#),
            format!(r#"{{"format":1,"routing_digest":"{digest}","kvs":{{}}}}"#),
            format!(
                r#"{{"routing_digest":"{digest}","routing_digest":"x","format":1,"revision":1,"kvs":{{}}}}"#
            ),
            r#"{"format":1,"revision":1,"routing_digest":"","kvs":{}}"#.to_owned(),
            String::new(),
        ] {
            assert_eq!(snapshot_header(refused.as_bytes()), None, "{refused}");
        }
    }
}
