//! How a label value read from a counter file is served: one-to-one, so that two label
//! sets of a file are never served as one series (issue 40, 7a: `/metrics` served one
//! series twice when a value held `"` and another the `%22` it was escaped to).
//!
//! Bytes in `A-Za-z0-9_.:/@+-` pass as they are; every other byte is written `%XX`
//! (upper-case hex), the escape character `%` itself included (`%25`). That is plain
//! percent-encoding: one URL-decode gives the bytes back, so no two values are served
//! alike. The writer's own encoding of a region key (docs/traffic.md, `%XX` as cache
//! tags are) is thus served encoded once more: `a%20b` as `a%2520b`.

/// The bytes served unchanged.
fn passes(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"_.:/@+-".contains(&byte)
}

/// `bytes` as served in a label value (see the module's text).
pub(crate) fn label_value(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(bytes.len());
    for &byte in bytes {
        if passes(byte) {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use dw_traffic::{Counters, LabelSet, ProcessLocks, Step, count, words_to_bytes, zeroed_words};

    use super::*;
    use crate::metrics::Metrics;

    /// The inverse: a URL-decode.
    fn decoded(served: &str) -> Vec<u8> {
        let bytes = served.as_bytes();
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            if bytes[at] == b'%' {
                let hex = std::str::from_utf8(&bytes[at + 1..at + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                at += 3;
            } else {
                out.push(bytes[at]);
                at += 1;
            }
        }
        out
    }

    #[test]
    fn values_are_escaped_and_every_byte_comes_back() {
        assert_eq!(label_value(b"fra-a"), "fra-a");
        assert_eq!(label_value(b"continent/EU"), "continent/EU");
        assert_eq!(label_value(b"a:b@c+d_e.f"), "a:b@c+d_e.f");
        assert_eq!(label_value(b"a\"b\\c\n%41"), "a%22b%5Cc%0A%2541");
        assert_eq!(label_value(b"a%20b"), "a%2520b");
        assert_eq!(label_value(b""), "");
        for byte in 0..=u8::MAX {
            let served = label_value(&[byte]);
            assert_eq!(decoded(&served), [byte], "{served}");
            assert!(served.bytes().all(|b| passes(b) || b == b'%'), "{served}");
        }
    }

    /// Values that escaped to one text before: a byte and its escape, the escape of an
    /// escape. Each is served as its own text.
    #[test]
    fn no_two_values_are_served_alike() {
        let values: [&[u8]; 8] = [
            b"\"", b"%22", b"%2522", b"%", b"%25", b"a b", b"a%20b", b"a%2520b",
        ];
        let mut served = BTreeMap::new();
        for value in values {
            let text = label_value(value);
            assert_eq!(decoded(&text), value);
            if let Some(other) = served.insert(text.clone(), value) {
                panic!("{other:?} and {value:?} are both served as {text:?}");
            }
        }
    }

    /// The whole render: a counter file holding two label sets whose origins differ only
    /// as `"` and `%22` serves two series, each with its own count.
    #[test]
    fn a_file_s_label_sets_are_served_as_as_many_series() {
        let words = zeroed_words();
        let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
        let slot = counters.slot_counters(counters.claim_slot(1).unwrap());
        let quote = LabelSet::new(b"DE", Step::Country, b"DE", b"o\"", b"s", false);
        let escaped = LabelSet::new(b"DE", Step::Country, b"DE", b"o%22", b"s", false);
        count(slot, counters.label_id(&quote));
        for _ in 0..2 {
            count(slot, counters.label_id(&escaped));
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(dw_traffic::file_name(1000));
        std::fs::write(&path, words_to_bytes(&words)).unwrap();
        std::os::unix::fs::chown(&path, Some(1000), None).expect("chown (root, in the devenv)");
        let text = Metrics::new(Duration::from_secs(60), None)
            .with_answers(dir.path().to_owned(), "n".into())
            .render();
        let series: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("dw_router_answers_total{"))
            .collect();
        let names: std::collections::BTreeSet<&str> = series
            .iter()
            .map(|line| line.rsplit_once(' ').unwrap().0)
            .collect();
        assert_eq!(names.len(), series.len(), "a series served twice:\n{text}");
        assert!(
            series
                .iter()
                .any(|l| l.contains("origin=\"o%22\"") && l.ends_with(" 1")),
            "{text}"
        );
        assert!(
            series
                .iter()
                .any(|l| l.contains("origin=\"o%2522\"") && l.ends_with(" 2")),
            "{text}"
        );
    }
}
